"""Differential-testing oracle: the pinned Pi release run in Node beside pimem.

``install`` puts Node 22 and ``@earendil-works/pi-coding-agent@0.87.1`` into a cache folder,
``driver.mjs`` runs Pi's own functions over batches of requests, ``client`` talks to it from
Python and ``plugin`` offers the session-scoped pytest fixture ``oracle``.
"""
