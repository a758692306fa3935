"""The incremental engine: what remembers, beside the plain port.

The port (:mod:`pimem.core.session_manager`, :mod:`pimem.core.compaction`, …) computes each answer from
scratch, as Pi does. The engine keeps what makes repeated answers cheap and derives every answer from the
port's functions:

==================  ====================================================================================
``paths``           a session's index (runs of parent links, entry types): its paths as slices, and the
                    context calls ``pimem.build_session_context`` & co. taking them
``caches``          per-message memos: ``TokenCache`` (token estimates), ``SerializationCache`` (texts)
``tracker``         ``ContextTracker``: projection, estimates, cut points and preparations along a
                    growing path
==================  ====================================================================================

Each fast path declares the Pi function it stands for and the port it is tested against
(``pimem.core.porting``, ``docs/porting.md``).
"""
