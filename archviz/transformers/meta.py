"""Build the real transformers model on torch's meta device, and read off what it holds.

This is the second of archviz's three witnesses (analytic graph, meta model, checkpoint header): the
modeling code transformers ships, instantiated on the ``meta`` device so that no weight is allocated,
and asked for its parameters, buffers, tied weights and, by a forward pass on meta tensors, the shape
that every module outputs.

transformers 5 keeps some weights in a different layout from the checkpoints on the Hub (MoE experts
fused into one ``[E, 2I, d]`` tensor instead of one ``[I, d]`` tensor per expert and projection). The
names and shapes reported here are put back into checkpoint layout with transformers' own save path
(``remove_tied_weights_from_state_dict`` then ``revert_weight_conversion``, exactly what
``save_pretrained`` runs; ``archviz.transformers.conversion``), so no second table of expert names exists in archviz.
Which class is built from which config is ``archviz.transformers.build``'s.

It is one of the modules that may import torch and transformers (``archviz.transformers.TORCH_MODULES`` lists them
all); it reaches every private or unstable transformers API through ``archviz.transformers.internals`` and imports
them inside functions: importing ``archviz.transformers.meta`` for its dataclasses costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archviz.code.modeltree import BuildRecord, Shape
from archviz.common.errors import InputError, raised_in_archviz
from archviz.inputs.recipe import ModelRecipe
from archviz.transformers.build import instantiate_on_meta
from archviz.transformers.conversion import (
    checkpoint_shapes,
    one_conversion_mapping,
    saved_state_dict,
    tensor_shape,
    tied_pairs,
)
from archviz.transformers.tracing import first_line

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaModel:
    """The real modeling code built on the meta device, and what it holds."""

    class_name: str
    """The transformers class that was instantiated, e.g. ``DeepseekV3ForCausalLM``."""
    model_type: str
    """The transformers ``model_type`` whose config class read the config, e.g. ``deepseek_v3``."""
    parameters: dict[str, Shape]
    """Every parameter as the checkpoint stores it: checkpoint name -> shape. Fused expert tensors are
    split back into one tensor per expert (``model.layers.1.mlp.experts.7.gate_proj.weight``) and tied
    aliases are left out, exactly as ``save_pretrained`` writes them."""
    module_parameters: dict[str, Shape]
    """Every parameter as the modeling code holds it (``named_parameters()``, tied aliases once):
    module name -> shape."""
    persistent_buffers: dict[str, Shape]
    """Buffers that are saved with the weights (e.g. ``e_score_correction_bias``): checkpoint name ->
    shape."""
    non_persistent_buffers: dict[str, Shape]
    """Buffers the modeling code computes and never saves (e.g. rotary ``inv_freq``): module name ->
    shape."""
    tied: tuple[tuple[str, str], ...]
    """Tied weights as ``(alias, source)`` module names: the alias is the same tensor as the source and is
    not in :attr:`parameters`."""
    total_parameters: int
    """Number of parameter elements in memory, each tied weight counted once: the sum over
    :attr:`module_parameters`, and over :attr:`parameters` unless a load-time conversion changes shapes (Inkling-2's
    checkpoint stores its head padded, and transformers unpads it on load)."""
    total_persistent_buffer_elements: int
    """Number of elements in :attr:`persistent_buffers`."""
    module: nn.Module = field(repr=False, compare=False)
    """The meta-device ``torch.nn.Module`` itself, kept for :func:`trace_shapes`."""
    built: BuildRecord | None = None
    """Which class was built from which file, and why (None for a module built elsewhere and only described)."""


def build_meta_model(
    config: Mapping[str, Any],
    *,
    model_type: str,
    architecture: str | None = None,
    dtype: str | None = None,
    trust_remote_code: bool = False,
    model_dir: Path | None = None,
    config_path: str = "config.json",
) -> MetaModel:
    """Instantiate the model ``config`` describes on the meta device and describe what it holds.

    ``config`` is the parsed config.json; ``model_type`` the transformers family to read it with. The class is
    ``architecture`` when transformers has a class of that name for this config, else the class of the Auto class
    its name's task implies (``…ForCausalLM``, ``…ForConditionalGeneration``), else the first the config's class is
    registered with, base model last. ``dtype`` is built in (transformers' default when None). The model folder's
    own code (``auto_map``) is imported only when ``trust_remote_code`` is true and ``model_dir`` is given. What
    transformers rejects in the config is raised as :class:`InputError` naming ``config_path``.
    """
    recipe = ModelRecipe(
        config=config,
        model_type=model_type,
        architecture=architecture,
        dtype=dtype,
        normalisations=(),
        config_path=config_path,
    )
    return build_from_recipe(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)


def build_from_recipe(
    recipe: ModelRecipe, *, trust_remote_code: bool = False, model_dir: Path | None = None
) -> MetaModel:
    """The model a :class:`ModelRecipe` asks for, on the meta device, described, with what was built."""
    module, built = instantiate_on_meta(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)
    with naming_fails_on(recipe, module):
        return describe_meta_module(module, built=built)


@contextmanager
def naming_fails_on(recipe: ModelRecipe, module: nn.Module) -> Iterator[None]:
    """transformers' save-time renaming failing on the model it built from the user's config (0 experts to split, a
    converter expecting tensors the config gives no module for) is bad input, exit 2; archviz's own errors pass."""
    try:
        yield
    except Exception as exc:
        if raised_in_archviz(exc):
            raise
        raise InputError(
            f"transformers cannot name the checkpoint tensors of {type(module).__name__} built from this config: "
            f"{type(exc).__name__}: {first_line(exc)}",
            path=recipe.config_path,
        ) from exc


def instantiate_meta_module(
    recipe: ModelRecipe, *, trust_remote_code: bool = False, model_dir: Path | None = None
) -> nn.Module:
    """The model on the meta device, without describing it (enough for ``trace_shapes``)."""
    return instantiate_on_meta(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)[0]


def describe_meta_module(module: nn.Module, *, built: BuildRecord | None = None) -> MetaModel:
    """Read parameters, buffers and tied weights off a (meta-device) transformers model."""
    module_parameters = {name: tensor_shape(p) for name, p in module.named_parameters()}
    parameter_names = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    full_state = module.state_dict()
    saved_state = saved_state_dict(module, dict(full_state))
    parameter_state = {k: v for k, v in saved_state.items() if k in parameter_names}
    buffer_state = {k: v for k, v in saved_state.items() if k not in parameter_names}
    persistent_module_names = {k for k in full_state if k not in parameter_names}
    non_persistent = {
        name: tensor_shape(b) for name, b in module.named_buffers() if name not in persistent_module_names
    }
    config = getattr(module, "config", None)
    with one_conversion_mapping(module):
        parameters = checkpoint_shapes(module, parameter_state)
        persistent_buffers = checkpoint_shapes(module, buffer_state)
    return MetaModel(
        class_name=type(module).__name__,
        model_type=str(getattr(config, "model_type", "")),
        parameters=parameters,
        module_parameters=module_parameters,
        persistent_buffers=persistent_buffers,
        non_persistent_buffers=non_persistent,
        tied=tied_pairs(module, saved_state),
        total_parameters=sum(p.numel() for p in module.parameters()),
        total_persistent_buffer_elements=sum(
            math.prod(tensor_shape(full_state[name])) for name in persistent_module_names
        ),
        module=module,
        built=built,
    )
