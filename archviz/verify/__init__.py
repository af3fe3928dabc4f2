"""Verification: the analytic graph against witnesses independent of it, leg by leg.

The legs as plain data and the verdict (``legs``); the shape leg, the trace's shapes against the graph's
(``shapecheck``); torch's FLOP counter and transformers' cache object against the cost model (``costcheck``); the
checkpoint's headers (``checkpoint``) reconciled with the graph tensor by tensor (``reconcile``); ``check`` runs the
legs for ``archviz check``. What the witnesses read off transformers' model (building it on the meta device, the
shape trace, the FLOP count and the cache) is asked of the transformers adapter (``archviz.transformers``), inside
functions.

May import every stage before it; never torch or transformers.
"""
