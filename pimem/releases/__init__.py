"""Other Pi releases that pimem mirrors beside the pinned 0.87.1 core: 1.6.0
(:mod:`~pimem.releases.pi_1_6_0`) and 0.13.2, the release that wrote the real v1 sessions
(:mod:`~pimem.releases.pi_0_13_2`). Each is checked against its own release in Node."""
