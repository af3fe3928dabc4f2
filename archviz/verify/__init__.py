"""Verification: the analytic graph against witnesses independent of it, leg by leg.

The legs as plain data and the verdict (``legs``); transformers' model built on the meta device (``meta``), the shape
trace (``tracing``, with the data flow it records in ``flowtrace``) and its comparison (``shapecheck``); torch's FLOP
counter and transformers' cache object (``witness``) against the cost model (``costcheck``); the checkpoint's headers
(``checkpoint``) reconciled with the graph tensor by tensor (``reconcile``); private transformers internals reached
through one adapter (``transformers_internals``); the names older transformers had, lent to a model's own code while it
is imported (``remote_compat``); ``check`` runs the legs for ``archviz check``.

May import every stage before it. The only modules of archviz that may import torch or transformers are listed in
``TORCH_MODULES`` below, and nowhere else.
"""

TORCH_MODULES: tuple[str, ...] = (
    "archviz.verify.meta",
    "archviz.verify.tracing",
    "archviz.verify.flowtrace",
    "archviz.verify.witness",
    "archviz.verify.transformers_internals",
    "archviz.verify.remote_compat",
)
"""The modules that may import torch or transformers (``tests/test_layering.py`` holds every other module to it)."""
