"""The faithful core: Pi 0.87.1's session memory, file for file.

Each module mirrors one file of ``@earendil-works/pi-coding-agent@0.87.1`` (``dist/core/``) or of
``@earendil-works/pi-ai`` and returns what Pi returns, byte for byte (checked against the real
release in ``tests/*/test_differential*.py``). Every Pi function has one home here, declared beside it
(``porting``; the map is ``docs/porting.md``); the port keeps nothing between calls, and what remembers
lives apart in ``incremental``, derived from the port and checked against it:

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
``incremental``                      the engine: a session's index (paths as slices), memos, ``ContextTracker``
``porting``                          the port map: ``@port``, ``@derived``, ``not_ported``
==================================== ===============================================================

Nothing here imports pandas or the analysis modules of :mod:`pimem`; they build on this.
"""
