"""The faithful core: Pi 0.87.1's session memory, file for file.

Each module mirrors one file of ``@earendil-works/pi-coding-agent@0.87.1`` (``dist/core/``) or of
``@earendil-works/pi-ai`` and returns what Pi returns, byte for byte (checked against the real
release in ``tests/test_differential*.py``):

==================================== ===============================================================
``session_manager``                  ``core/session-manager.js``: load, migrate, tree, projection
``messages``                         ``core/messages.js``: ``convertToLlm`` and summary messages
``compaction.compaction``            ``core/compaction/compaction.js``: tokens, cut points, compact
``compaction.branch_summarization``  ``core/compaction/branch-summarization.js``
``compaction.utils``                 ``core/compaction/utils.js``: file operations, serialization
``settings_manager``                 ``core/settings-manager.js``: settings files, model table
``agent_session``                    ``core/agent-session.js``: compaction runs, ``/tree``, hooks
``pi_ai``                            pi-ai's text, transcript and overflow helpers
``llm``                              the request a summarizer answers (Pi's stream function)
``context_tracker``                  the same results, kept incrementally along a growing path
==================================== ===============================================================

Nothing here imports pandas or the analysis modules of :mod:`pimem`; they build on this.
"""
