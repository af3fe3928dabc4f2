"""The transformers adapter: the one place that imports torch and transformers, or reads transformers' facts.

transformers' model built on the meta device and what it holds, with its config class's facts (defaults, parallel
plans) and the module tree a code-reading family builds from (``meta``); the shape trace (``tracing``, with the data
flow it records in ``flowtrace``); torch's FLOP counter and transformers' cache object (``witness``); the names older
transformers had, lent to a model's own code while it is imported (``remote_compat``); every private or unstable
transformers API behind one small function each (``internals``).

May import the stages before it up to the cost model. Its modules import torch and transformers inside functions, so
that importing one costs nothing; the modules that may import them are listed in ``TORCH_MODULES``, and no other
module of archviz imports them. Inside this package ``import transformers`` is the library itself (absolute imports).
"""

TORCH_MODULES: tuple[str, ...] = (
    "archviz.transformers.meta",
    "archviz.transformers.tracing",
    "archviz.transformers.flowtrace",
    "archviz.transformers.witness",
    "archviz.transformers.internals",
    "archviz.transformers.remote_compat",
)
"""The modules that may import torch or transformers (``tests/test_layering.py`` holds every other module to it)."""
