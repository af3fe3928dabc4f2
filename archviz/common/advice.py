"""How a message advises an option: the command line names its flags, the Python API its arguments. A stage that
advises one takes the caller's spelling (the command line's by default), so ``Model.check`` never says ``--no-meta``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Advice:
    """The phrases a check's messages use for the options that change its outcome."""

    no_meta: str
    """What turned the meta-device model off."""
    give_checkpoint: str
    """How to give a checkpoint when none was found."""
    trust_remote_code: str
    """How to let the model's own code be built."""
    cite_transformers: str
    """How to make the cards cite transformers' modeling file."""


COMMAND_LINE = Advice(
    no_meta="--no-meta",
    give_checkpoint="pass --checkpoint, or check a folder or Hub repo that holds safetensors",
    trust_remote_code="pass --trust-remote-code",
    cite_transformers="pass --source transformers",
)
"""``archviz check``'s flags (and the site's, which ``archviz render`` verifies)."""

PYTHON_API = Advice(
    no_meta="meta=False",
    give_checkpoint="pass checkpoint= to Model.check, or describe a folder or Hub repo that holds safetensors",
    trust_remote_code="pass trust_remote_code=True to Model.check",
    cite_transformers="describe the model with source='transformers'",
)
"""``archviz.describe`` and ``Model.check``'s arguments."""
