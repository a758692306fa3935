"""Experiments over many replays: sweeps of settings × sessions (:mod:`~pimem.experiments.sweep`), the
study's grids, runs and drift-report runs (:mod:`~pimem.experiments.study`),
the measures of one run (:mod:`~pimem.experiments.run_measures`), intervals and bands
(:mod:`~pimem.experiments.uncertainty`) and the recorded real-model summaries
(:mod:`~pimem.experiments.model_summaries`)."""
