"""Pi 0.87.1's ``core/compaction/``: compaction, branch summarization and their utilities."""
