"""The fast paths of fact extraction and look-up give exactly the whole-text answers.

Long texts find their paths and identifiers line by line (memoised lines), a kept tail is indexed as
its messages' indexes joined: both must equal the plain passes over the whole text, on hand-made
edge cases (fences and numbers across a break, names at line ends) and on the real sessions.
"""

from __future__ import annotations

import pytest

from pimem.core.session_manager import build_session_path, is_walked_path
from pimem.drift.records import source_text as message_text
from pimem.sessions.load import load_session
from pimem.text import facts as F
from tests.conftest import REAL_DIR, REAL_V3

EDGE_PARTS = [
    "see `src/app.ts` and run `npm test`\nthen call parseArgs(argv) in cli/main.py",
    "```ts\nconst x = loadConfig()\n",  # a fence opened here …
    "closes here ```\n5\nms later the build took 12 s",  # … closed in the next part; a number over a break
    "FooBar.baz and fooBar() and Config.load; ./scripts/setup and ../x/y.md\n\n",
    "Error: Cannot find module 'left-pad' from 'index.js'\nnot found: tests/test_a.py",
    "We decided to use pnpm instead of npm. Never commit the lock file.\ngit status",
    "",
    "README.md\npackages/ai/src/index.ts\nfoo.ts: 'bar' 'baz' error TS2304",
]


def _whole_names(text: str) -> list[tuple[str, str, int, str]]:
    tokens, bare = F._path_groups(text)
    return [("path", *x) for x in (*tokens, *bare)] + [("identifier", *x) for x in F.identifiers_in_text(text)]


def _facts_of(texts: list[str]) -> list[F.Fact]:
    facts = F.extract_facts([(None, {"role": "user", "content": t}) for t in texts])
    facts += F.extract_facts([(None, {"role": "assistant", "content": [{"type": "text", "text": t}]}) for t in texts])
    lines = [ln for t in texts for ln in t.split("\n") if ln.strip()]
    facts += [F.Fact("error", F.fold(ln), None, 0, 0, "toolResult", "tool_result", ln) for ln in lines]
    facts += [F.Fact("command", F.fold(c), None, 0, 0, "assistant", "bash", c)
              for c in ("git status", "npm test", "ls", "later the")]
    facts += [F.Fact("number", v, None, 0, 0, "user", "text", v) for v in ("5 ms", "12 s")]
    return facts


def _real_texts() -> list[str]:
    texts = []
    for name in REAL_V3:
        path = REAL_DIR / name
        if not path.exists():
            pytest.skip("real sessions not available")
        for e in load_session(path).entries:
            if e.get("type") == "message":
                texts.append(message_text(e["message"]))
            elif e.get("type") == "compaction":
                texts.append(str(e.get("summary", "")))
    return texts


def test_names_by_line_equal_the_whole_text_passes_on_edge_cases() -> None:
    text = "\n".join(EDGE_PARTS * 3)
    assert F._names_by_line(text) == _whole_names(text)
    assert any(kind == "identifier" for kind, *_ in F._names_by_line(text))


def test_names_by_line_equal_the_whole_text_passes_on_real_texts() -> None:
    texts = _real_texts()
    joined = ["\n".join(texts[i : i + 40]) for i in range(0, len(texts), 40)]
    long = [t for t in joined + texts if len(t) > F._LINES_FROM and "\n" in t]
    assert long
    for t in long[::max(1, len(long) // 8)]:
        assert F._names_by_line(t) == _whole_names(t)


def test_long_text_facts_equal_short_text_rules() -> None:
    text = "\n".join(EDGE_PARTS * 600)
    assert len(text) > F._MEMO_CHARS
    fast = F._find_text_facts(text, "assistant", "text")
    names = [f for f in fast if f[0] in ("path", "identifier")]
    assert names == _whole_names(text)
    assert F._find_text_facts(text, "assistant", "text", False) == tuple(f for f in fast if f[0] != "decision")


@pytest.mark.parametrize("real", [False, True])
def test_joined_index_answers_as_the_index_of_the_joined_text(real: bool) -> None:
    across = ["the build took 12", "ms, then 3", "", "% and 4", "KB later 5", "\n5 s"]  # over the breaks
    groups = [EDGE_PARTS, EDGE_PARTS[1:3], [], [""], EDGE_PARTS[::-1], across, EDGE_PARTS + across]
    texts = EDGE_PARTS
    if real:
        texts = _real_texts()
        groups = [texts[i : i + 40] for i in range(0, len(texts), len(texts) // 3)]
    facts = _facts_of(texts[:60])
    assert {f.kind for f in facts} >= {"path", "identifier", "number", "error", "command", "constraint", "decision"}
    for parts in groups:
        joined, whole = F.JoinedIndex(parts), F.SummaryIndex("\n".join(parts))
        assert joined.text == whole.text and joined.folded == whole.folded and joined.paths == whole.paths
        assert joined.numbers == whole.numbers
        assert [f for f in facts if F.fact_present(f, joined)] == [f for f in facts if F.fact_present(f, whole)]
    assert F.JoinedIndex(across).numbers == {"12 ms", "4 KB", "5 s"}  # "3" and "%" meet only over an empty part


def test_joined_index_is_shared_per_parts() -> None:
    assert F.joined_index(["a", "b"]) is F.joined_index(["a", "b"])
    assert F.joined_index(["a", "b"]) is not F.joined_index(["a\nb"])


def test_walked_path() -> None:
    a = {"type": "message", "id": "a", "parentId": None}
    b = {"type": "message", "id": "b", "parentId": "a"}
    c = {"type": "message", "id": "c", "parentId": "b"}
    assert is_walked_path([a, b, c]) and is_walked_path([]) and build_session_path([a, b]) == [a, b]
    assert not is_walked_path([a, c])  # a gap: the prefix is not its own walk
    assert not is_walked_path([{**a, "parentId": "c"}, b, c])  # a cycle back onto the path
    assert not is_walked_path([a, b, {**c, "id": "a", "parentId": "b"}])  # a repeated id
    assert not is_walked_path([{**a, "id": 1}])


@pytest.mark.parametrize("real", [False, True])
def test_facts_present_answers_as_a_fresh_search_of_each_fact(real: bool) -> None:
    texts = _real_texts() if real else EDGE_PARTS
    facts = _facts_of(texts[:40])[:: 4 if real else 1]
    facts += [F.Fact("identifier", n, None, 0, 0, "assistant", "text", n)
              for n in ("loadConfig", "x", "FooBar.baz", "fooBar()", "run", "`odd name`", "()")]
    summaries = ["\n".join(texts[i : i + 25]) for i in range(0, min(len(texts), 100), 25)] + ["", "\n\n"]
    summaries.append("```\n" + "\n".join(EDGE_PARTS) + "\nrun the **loadConfig** step")
    for text in summaries:
        plain = F.SummaryIndex(text)
        fresh = [F._holds(plain, f.kind, f.value, f.surface or f.value) for f in facts]  # no memo, no probe
        for index in (F.SummaryIndex(text), F.JoinedIndex(text.split("\n"))):
            assert F.facts_present(facts, index) == fresh
            assert [F.fact_present(f, index) for f in facts] == fresh  # memoised the second time
    assert any(F.facts_present(facts, summaries[0])) and not all(F.facts_present(facts, summaries[0]))


def test_number_pattern_finds_what_the_lookbehind_first_pattern_finds() -> None:
    import re

    units = "|".join(sorted((re.escape(u) for u in F._UNITS), key=len, reverse=True))
    plain = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s?(" + units + r")(?![\w])", re.I)
    cases = ["1,000ms", "a1,000 ms", ".5 s", "5.5.5 s", "1,00 s", "12,345,678 tokens", "x 3\nms", "1,2345 s",
             "99% 100 % 5x", "v2 3 MB", "٣ ms 3 ms"]
    for text in cases + _real_texts()[::7]:
        assert [(m.span(), m.groups()) for m in F._NUMBER.finditer(text)] == \
            [(m.span(), m.groups()) for m in plain.finditer(text)]


def _fold_by_its_definition(text: str) -> str:
    """fold as documented: marks and lone apostrophes dropped, whitespace runs to one space, lower case."""
    import re

    t = re.sub(r"[`*\"“”‘’]|(?<!\w)'|'(?!\w)", "", text)
    return re.sub(r"\s+", " ", t).strip().lower()


_FOLD_ALPHABET = "ab1_ '\"`*“”‘’\t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000é-.$İß"


def test_fold_is_its_definition_on_generated_and_real_text() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=3000, deadline=None, derandomize=True)
    @given(st.text(alphabet=_FOLD_ALPHABET, max_size=16) | st.text(max_size=40))
    def check(text: str) -> None:
        assert F._fold(text) == _fold_by_its_definition(text)

    check()
    every_space = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())
    edge = f"x{every_space}'a' b'c 'd* `e`{every_space}“f’ g''h '"
    assert F._fold(edge) == _fold_by_its_definition(edge) == "x a b'c d e f gh"
    for path in (REAL_DIR / name for name in REAL_V3):
        if path.exists():
            text = path.read_text(encoding="utf-8")
            assert F._fold(text) == _fold_by_its_definition(text)


def test_fold_by_lines_is_fold_on_generated_and_real_text() -> None:
    """A text folded from its memoised lines (summaries, whose lines repeat) is the text folded."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = _FOLD_ALPHABET + "ΣσςΑ\n\n"

    @settings(max_examples=3000, deadline=None, derandomize=True)
    @given(st.text(alphabet=alphabet, max_size=24) | st.text(max_size=40))
    def check(text: str) -> None:
        assert F.fold_by_lines(text) == F.fold(text)

    check()
    assert F.fold_by_lines("ΑΣ\nΣΑ 'x\n'") == F.fold("ΑΣ\nΣΑ 'x\n'") == "ας σα x"  # final sigma at a break
    for text in _real_texts():
        assert F.fold_by_lines(text) == F.fold(text)


def _names_by_every_pattern(text: str) -> tuple:
    """The path and identifier groups with every pattern run over the text (no test of what it holds first)."""
    import re

    found, spans = [], []
    for m in F.PATH_TOKEN.finditer(text):
        norm = F.normalize_path(m.group(0))
        if norm and F._is_path_like(norm):
            found.append((norm, m.start(), m.group(0)))
            spans.append(m.span())
    bare = [(F.normalize_path(m.group(0)), m.start(), m.group(0)) for m in F.BARE_FILE.finditer(text)
            if not any(a <= m.start() < b for a, b in spans) and F.normalize_path(m.group(0))]
    names, masked = [], text
    for m in F._BACKTICK.finditer(text):
        code = m.group(1).strip()
        if F._IDENT_SHAPE.match(code) and not F._is_path_like(code):
            name = re.sub(r"\(.*\)$", "", code)
            if len(name) >= 2:
                names.append((name, m.start(1), code))
        masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end():]
    groups = [tuple(names)]
    for rx in (F._CALL, F._DOTTED, F._CAMEL, F._LOWER_CAMEL):
        groups.append(tuple((m.group(1), m.start(1), m.group(0)) for m in rx.finditer(masked)
                            if not F._is_path_like(m.group(1)) and len(m.group(1)) >= 3))
    return (tuple(found), tuple(bare), *groups)


def test_names_skip_only_patterns_that_cannot_match() -> None:
    """Paths and identifiers found after a test of the characters each pattern needs (a slash, a dot,
    a parenthesis, a capital) are those every pattern finds over the whole text."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = "aZ_.(/)`@~-: \nx1ts"
    words = st.sampled_from(["src/a.ts", "`foo`", "Foo.bar", "FooBar", "fooBar", "run(", "x)", "./y.md", "@z.py"])

    @settings(max_examples=3000, deadline=None, derandomize=True)
    @given(st.text(alphabet=alphabet, max_size=30) | st.lists(words | st.text(alphabet=alphabet, max_size=3),
                                                              max_size=8).map(" ".join))
    def check(text: str) -> None:
        assert (*F._path_groups(text), *F._identifier_groups(text)) == _names_by_every_pattern(text)

    check()
    for text in _real_texts()[:400]:
        for line in text.split("\n"):
            assert (*F._path_groups(line), *F._identifier_groups(line)) == _names_by_every_pattern(line)


_NUMBER_ALPHABET = "0123456789٣,. \n\t\r%smkbhxMSKſ\u212aépw_"
_NUMBER_WORDS = ["ms", "s", "min", "tokens", "lines", "KB", "%", "x", "px", "seconds", "1,000", "2.5", "12", "٣"]


def test_a_texts_numbers_are_its_lines_and_the_breaks_between_them() -> None:
    """The numbers of a text from its memoised lines (and the pairs of lines a number and its unit
    span) are the numbers a search of the whole text finds, on generated and real texts."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    def whole(text: str) -> set[str]:
        return {v for v, _, _ in F.numbers_in_text(text)}

    pieces = st.lists(st.sampled_from(_NUMBER_WORDS) | st.text(alphabet=_NUMBER_ALPHABET, max_size=4), max_size=12)

    @settings(max_examples=3000, deadline=None, derandomize=True)
    @given(st.text(alphabet=_NUMBER_ALPHABET, max_size=30) | pieces.map("".join))
    def check(text: str) -> None:
        assert F._text_numbers(text) == whole(text)

    check()
    crossing = "took 12\nms, then 1,000\ntokens and 7\n% and 3\nmsec and 4.5\n\u212ab"
    assert F._text_numbers(crossing) == whole(crossing) >= {"12 ms", "1000 tokens", "7 %", "4.5 KB"}
    texts = _real_texts()
    for text in texts + ["\n".join(texts[i : i + 30]) for i in range(0, len(texts), 30)]:
        assert F._text_numbers(text) == whole(text)
