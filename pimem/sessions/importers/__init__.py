"""Other agents' transcripts as Pi sessions: Claude Code (:mod:`.claude_code`) and Codex
(:mod:`.codex`), read by :mod:`.records` (plain or gzip'd, messy lines tolerated)."""

from pimem.sessions.importers.claude_code import import_claude_code
from pimem.sessions.importers.codex import import_codex
from pimem.sessions.importers.records import ImportReport

__all__ = ["import_claude_code", "import_codex", "ImportReport"]
