"""Compaction strategies: other Pi releases' compaction beside Pi 0.87.1's (``pimem.core``).

``pimem.strategies.pi_1_6_0`` and ``pimem.strategies.pi_0_13_2`` hold those releases' rules as
pure functions, each checked against the real release in Node.
"""
