"""The replay engine: a recorded session walked through Pi's agent loop under other settings.

One concern per module (the design: ``docs/replay.md``):

* :mod:`~pimem.replays.engine` — the loop (:func:`~pimem.replays.engine.replay`) and its check points;
* :mod:`~pimem.replays.config` — what a replay is asked to do (:class:`~pimem.replays.config.ReplayConfig`);
* :mod:`~pimem.replays.settings` — settings checked against a window (:func:`~pimem.replays.settings.check_settings`);
* :mod:`~pimem.replays.tokens` — the token sources, one class each;
* :mod:`~pimem.replays.recording` — what the recording says (usage, its own projection, the calibration fit);
* :mod:`~pimem.replays.calibration` — the calibrated token model;
* :mod:`~pimem.replays.result` — :class:`~pimem.replays.result.ReplayResult` and its tables;
* :mod:`~pimem.replays.navigate` — ``/tree`` navigation (:func:`~pimem.replays.navigate.navigate`);
* :mod:`~pimem.replays.strategies` — the compaction strategies; :mod:`~pimem.replays.cost` — what a replay costs.
"""
