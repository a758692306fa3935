"""Differential-testing oracle: the pinned Pi release run in Node beside pimem.

``install`` puts Node 22 and ``@earendil-works/pi-coding-agent@0.87.1`` into a cache folder,
``driver.mjs`` runs Pi's own functions over batches of requests (``agent_loop.mjs`` its agent loop,
``driver_0_13_2.mjs`` Pi 0.13.2's; ``shared.mjs`` holds what they share), ``client`` talks to it from
Python and ``plugin`` offers the session-scoped pytest fixture ``oracle``.
"""
