"""The transformers adapter: the one place that imports torch and transformers, or asks transformers for a fact.

The installed transformers read as text, never imported: its modeling file for a model_type, its config classes'
``attribute_map`` (``package``) and its conversion mapping's literal renames (``renames``), which the families and
provenance read before anything is built.

The rest imports it: its config classes and what they hold: whether a model_type ships, its defaults, its tensor- and
expert-parallel plans (``configs``); which class is built from a recipe's config, on the meta device (``build``), the
model folder's own classes under ``--trust-remote-code`` (``remote``) and the names older transformers had, lent to that
code while it is imported (``remote_compat``); the built model and what it holds (``meta``), its tensors in checkpoint
naming and a checkpoint's names as transformers loads them, from its conversion mapping (``conversion``); the module
tree a code-reading family builds from (``module_tree``); the shape trace (``tracing``, with the data flow it records in
``flowtrace``); torch's FLOP counter and transformers' cache object (``witness``); every private or unstable
transformers API behind one small function each (``internals``).

``package`` and ``renames`` may import the stages up to ``inputs`` and import neither torch nor transformers; the other
modules may import the stages before them up to the cost model, and import torch and transformers inside functions,
so that importing one costs nothing. They are listed in ``TORCH_MODULES``, and no other module of archviz imports
torch or transformers. Inside this package ``import transformers`` is the library itself (absolute imports only).
"""

TORCH_MODULES: tuple[str, ...] = (
    "archviz.transformers.configs",
    "archviz.transformers.build",
    "archviz.transformers.remote",
    "archviz.transformers.remote_compat",
    "archviz.transformers.meta",
    "archviz.transformers.conversion",
    "archviz.transformers.module_tree",
    "archviz.transformers.tracing",
    "archviz.transformers.flowtrace",
    "archviz.transformers.witness",
    "archviz.transformers.internals",
)
"""The modules that may import torch or transformers (``tests/cli/test_layering.py`` holds every other module to it)."""
