"""archviz: architecture documentation for Hugging Face models, as a command line, a static site and a Python API.

The API (``archviz.api``)::

    import archviz

    model = archviz.describe("kimi-k2-instruct")
    model.totals.parameters            # 1026408209408
    model.node("attention.q-a-proj")   # a node's card in a notebook
    model.cost(prompt=8192)            # FLOPs, weight and cache bytes at these sizes
    model.diff("kimi-k2.5")            # what changes, in words
    model.check(meta=False)            # the verdict and its legs

Importing archviz imports neither torch nor transformers. Everything not listed in ``__all__`` is private.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archviz.api import Cost, Diff, InputError, Model, ModelNode, Verdict, describe

    __version__: str
    """archviz's version, as ``archviz --version`` prints it (the installed package's metadata)."""

__all__ = ["Cost", "Diff", "InputError", "Model", "ModelNode", "Verdict", "describe"]


def __getattr__(name: str) -> Any:
    """The API's names and ``__version__``, on first use: the command line, which starts by importing this package,
    does without them (reading the version means scanning the installed packages' metadata, which ``archviz --help``
    need not pay for)."""
    if name == "__version__":
        from archviz.common.versions import installed_versions

        return installed_versions().archviz
    if name in __all__:
        from archviz import api

        return getattr(api, name)
    raise AttributeError(f"module 'archviz' has no attribute {name!r}")
