"""Memos are forgotten together, and forgetting changes no answer."""

from __future__ import annotations

import functools
import gc

from pimem.base import memo
from pimem.drift.metrics import chain_headline, drift_report
from pimem.sessions.load import load_session


def test_a_memoised_function_and_a_registered_memo_are_emptied_together() -> None:
    calls = []

    @memo.memoised(8)
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    kept: dict[str, int] = {"a": 1}
    memo.on_forget(kept.clear)
    assert double(2) == double(2) == 4 and calls == [2]
    memo.forget_memos()
    assert kept == {} and double.cache_info().currsize == 0
    assert double(2) == 4 and calls == [2, 2]


def _pimem_memos() -> list:
    return [o for o in gc.get_objects() if isinstance(o, functools._lru_cache_wrapper)
            and getattr(o, "__module__", "").startswith(("pimem.text", "pimem.drift", "pimem.summarizers"))]


def test_forgetting_empties_the_memos_a_report_fills_and_changes_none_of_its_numbers(sample_paths) -> None:
    import pimem.drift.needed as needed
    import pimem.text.facts as facts

    session = load_session(sample_paths[0])
    memo.forget_memos()
    memos = _pimem_memos()
    before = [m.cache_info().currsize for m in memos]  # memos of resources (a model, prompts) stay
    report = drift_report(session)
    lean = chain_headline(session)
    grown = [m for m, n in zip(memos, before) if m.cache_info().currsize > n]
    assert len(grown) >= 10 and facts._INDEXES
    memo.forget_memos()
    assert [m for m in grown if m.cache_info().currsize] == []  # every memo the measures fill is registered
    assert not facts._INDEXES and not facts._JOINED and facts._indexed_chars == 0 and not needed._SHARED
    again = drift_report(session)
    assert again.equals(report) and repr(chain_headline(session)) == repr(lean)
