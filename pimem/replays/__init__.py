"""The replay engine: a recorded session walked through Pi's agent loop under other settings
(:mod:`~pimem.replays.engine`), its compaction strategies (:mod:`~pimem.replays.strategies`),
the calibrated token source (:mod:`~pimem.replays.calibration`) and the cost of a replay
(:mod:`~pimem.replays.cost`)."""
