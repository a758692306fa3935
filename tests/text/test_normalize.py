"""Word normalisation for code sessions: identifier splitting, stems, synonym groups."""

from __future__ import annotations

from pimem.text.normalize import SYNONYMS, canonical_word, normal_words, split_identifier, stem


def test_identifiers_split_into_their_words():
    assert split_identifier("AgentSession.setModel") == ["agent", "session", "set", "model"]
    assert split_identifier("max_tokens") == ["max", "tokens"]
    assert split_identifier("HTTPServer") == ["http", "server"]
    assert split_identifier("settings-manager.ts") == ["settings", "manager", "ts"]


def test_stems_strip_inflections_but_not_short_words_or_ss_us():
    assert stem("running") == "run"
    assert stem("uses") == stem("use")
    assert stem("tests") == stem("testing") == "test"
    assert stem("class") == "class" and stem("status") == "status"
    assert stem("created") == stem("create")


def test_synonyms_map_to_their_group():
    assert canonical_word("created") == canonical_word("added") == canonical_word("introduce")
    assert canonical_word("deleted") == canonical_word("removed") == canonical_word("eliminate")
    assert canonical_word("directory") == canonical_word("folder")
    assert canonical_word("issue") != canonical_word("error")  # a GitHub issue is not an error
    assert all(len(group) >= 2 for group in SYNONYMS)


def test_normal_words_of_a_sentence():
    words = normal_words("Created AgentSession to eliminate the duplication")
    assert {"agent", "session", "agentsession", canonical_word("add"), canonical_word("remove")} <= words
    assert "the" not in words and "to" not in words
    assert normal_words("Created files", synonyms=False) != normal_words("Added files", synonyms=False)
    assert normal_words("Created files") == normal_words("Added files")
