"""A replay's own entries (compactions, refusals, context edits) never take an id a recorded entry
has: Pi's generateId avoids the ids of the session it writes, and the replayed session is written
with the recorded entries still to come."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from pimem import CompactionSettings, load_session, replay
from tests.support.tiny import tiny_session_lines

SETTINGS = CompactionSettings(reserve_tokens=500, keep_recent_tokens=500)


def _replay(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return replay(load_session(path), SETTINGS, context_window=3000, seed=7)


def test_a_compaction_never_takes_the_id_of_a_recorded_entry_still_to_come(tmp_path: Path) -> None:
    lines = tiny_session_lines(12)
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps(x) + "\n" for x in lines))
    first = _replay(plain)
    taken = first.compactions[0]["id"]

    # the recording's last entry gets the id the replay drew for its first compaction
    last = lines[-1]
    lines[-1] = {**last, "id": taken}
    clash = tmp_path / "clash.jsonl"
    clash.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = _replay(clash)  # before: InvalidEntryError: duplicate entry id
    recorded = {e["id"] for e in load_session(clash).entries}
    assert taken in recorded
    written = [e["id"] for e in result.session.entries if e["id"] not in recorded]
    assert written and len(written) == len(result.compactions) and not set(written) & recorded
    assert result.session.get_entry(taken)["message"] == last["message"]
    assert len({e["id"] for e in result.session.entries}) == len(result.session.entries)
