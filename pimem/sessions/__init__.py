"""Sessions on disk and in tables: finding and loading folders and corpora
(:mod:`~pimem.sessions.discover`), the DataFrame views (:mod:`~pimem.sessions.frames`) and the
bundled sample sessions (:mod:`~pimem.sessions.samples`)."""
