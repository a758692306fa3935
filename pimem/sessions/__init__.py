"""Sessions on disk and in tables: one loader for Pi's, Claude Code's and Codex's files
(:mod:`~pimem.sessions.load`, the importers in :mod:`~pimem.sessions.importers`), finding and loading
folders and corpora (:mod:`~pimem.sessions.discover`), the DataFrame views
(:mod:`~pimem.sessions.frames`) and the bundled sample sessions (:mod:`~pimem.sessions.samples`)."""
