"""Foundation shared by every layer: JavaScript semantics (:mod:`~pimem.base.js`), safe file
reading and atomic writes (:mod:`~pimem.base.files`), pandas columns and number formatting
(:mod:`~pimem.base.tables`), the TypedDicts of Pi's JSON (:mod:`~pimem.base.types`) and the cyclic
garbage collector's settings for allocation-heavy work (:mod:`~pimem.base.collector`).
Nothing here imports another pimem layer."""
