"""``pimem advise`` end to end on the bundled samples: the table, the held-out check and a settings.json block
that Pi reads back as the pick."""

from __future__ import annotations

import json

import pytest

from pimem.cli.main import main
from pimem.core.settings_manager import Settings


def _advise(sample_paths, out, window: int) -> int:
    """``pimem advise`` on two bundled samples at ``window``, reserve 2048 or 4096, keep 2000, 2 folds."""
    studied = [p for p in sample_paths if p.stem in ("auth-login-bug", "logslice-since-flag")]
    return main(["advise", *map(str, studied), "--model", "anthropic/claude-sonnet-4-5", "--window", str(window),
                 "--reserve", "2048,4096", "--keep", "2000", "--folds", "2", "--workers", "1", "-q", "-o", str(out)])


@pytest.mark.slow
def test_advise_prints_the_front_the_check_and_the_block_it_writes(sample_paths, tmp_path, capsys):
    out = tmp_path / "settings.json"
    code = _advise(sample_paths, out, 30000)
    text, err = capsys.readouterr()
    assert code == 0, err
    assert "anthropic/claude-sonnet-4-5 at its 30,000-token window: 2 session(s) at every setting" in text
    assert "held-out check (2 folds)" in text and "★" in text
    block = json.loads(out.read_text())
    pick = block["compaction"]["modelOverrides"]["anthropic/claude-sonnet-4-5"]
    printed, _ = json.JSONDecoder().raw_decode(text.split("settings.json (~/.pi/agent/ or <project>/.pi/):\n", 1)[1])
    assert printed == block and f"wrote {out}" in text
    read = Settings.from_dict(block).compaction_for("anthropic", "claude-sonnet-4-5")
    assert (read.reserve_tokens, read.keep_recent_tokens) == (pick["reserveTokens"], pick["keepRecentTokens"])
    assert pick["reserveTokens"] in (2048, 4096) and pick["keepRecentTokens"] == 2000


def test_advise_at_a_window_where_nothing_compacts_says_so_and_picks_nothing(sample_paths, tmp_path, capsys):
    out = tmp_path / "settings.json"
    code = _advise(sample_paths, out, 1_000_000)
    text, err = capsys.readouterr()
    assert code == 1 and "no session compacts at the 1,000,000-token window" in err
    assert "no session compacts at this window at any setting" in text
    assert "nan" not in text.lower() and "settings.json" not in text and not out.exists()
