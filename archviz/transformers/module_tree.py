"""The module tree of transformers' model on the meta device, as plain data: what a code-reading family
(``archviz.families.generic``) builds its graph from (``archviz.code.modeltree``).

Every module with what it holds itself, its tensors named as checkpoints name them, and the attributes its code set
(sizes, epsilon, window, routing); ``read_model_code`` builds the model, traces it and reads its tree. Imports torch and
transformers inside functions.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from archviz.code.modeltree import (
    EXPERT_COUNT_ATTRIBUTES,
    TOP_K_ATTRIBUTES,
    ModelCode,
    ModuleRecord,
    ModuleTree,
    Shape,
    TensorRecord,
)
from archviz.common.dtypes import safetensors_dtype
from archviz.inputs.recipe import CodeRequest
from archviz.transformers.configs import attribute
from archviz.transformers.conversion import checkpoint_shapes, one_conversion_mapping, tensor_shape
from archviz.transformers.meta import MetaModel, build_from_recipe, naming_fails_on
from archviz.transformers.tracing import trace_shapes

if TYPE_CHECKING:
    import torch
    from torch import nn


def read_model_code(request: CodeRequest) -> ModelCode:
    """Build the model ``request`` asks for on the meta device, trace it, and read its module tree.

    What a code-reading family (``archviz.families.generic``) builds its graph from, as plain data. The trace
    runs before the tree is read, and the module is restored after it (mode, experts kernel, forwards).
    """
    meta = build_from_recipe(
        request.recipe, trust_remote_code=request.model_dir is not None, model_dir=request.model_dir
    )
    trace = trace_shapes(
        meta.module,
        batch=request.batch,
        prefill=request.prefill,
        past=request.past,
        skip_repeats=True,
        record_flow=True,
    )
    with naming_fails_on(request.recipe, meta.module):
        tree = read_module_tree(meta)
    return ModelCode(tree=tree, trace=trace)


def read_module_tree(meta: MetaModel) -> ModuleTree:
    """Every module of a meta-device model as a plain record: what it holds itself, named as checkpoints name it."""
    root = meta.module
    aliases = dict(meta.tied)
    # Buffers the state dict keeps are the persistent ones (the rest are computed by the modeling code).
    saved_names = set(root.state_dict())
    modules = dict(root.named_modules())
    paths = {id(module): path for path, module in modules.items()}
    lists = {path for path, module in modules.items() if _is_module_list(module)}
    reverted = _RepeatedReversal(root, lists)
    below = _Below()
    with one_conversion_mapping(root):
        records = [
            _module_record(path, module, aliases, saved_names, reverted, below) for path, module in modules.items()
        ]
    records = [
        dataclasses.replace(record, layer_types=_config_layer_types(modules, record.path))
        if record.path in lists
        else record
        for record in records
    ]
    base = getattr(root, "base_model", None)
    return model_record(
        meta,
        modules=tuple(records),
        base_model=paths.get(id(base)) if base is not None and base is not root else None,
        input_embeddings=_input_embeddings_path(root, paths),
    )


def model_record(
    meta: MetaModel,
    *,
    modules: tuple[ModuleRecord, ...] = (),
    base_model: str | None = None,
    input_embeddings: str | None = None,
) -> ModuleTree:
    """A meta-device model's facts as plain data; its module records when given (``read_module_tree``)."""
    return ModuleTree(
        class_name=meta.class_name,
        modules=modules,
        base_model=base_model,
        input_embeddings=input_embeddings,
        tied=meta.tied,
        parameters=meta.parameters,
        persistent_buffers=meta.persistent_buffers,
        total_parameters=meta.total_parameters,
        total_persistent_buffer_elements=meta.total_persistent_buffer_elements,
        non_persistent_buffers=tuple(meta.non_persistent_buffers),
        built=meta.built,
    )


class _RepeatedReversal:
    """A module's tensors in checkpoint layout, reverted once per structure: the same module in another item of a
    module list (``model.layers.7.mlp`` after ``model.layers.1.mlp``) takes the first one's reversal, renumbered.

    A module tree holds the same modules in every layer, and each reversal costs milliseconds; Kimi-K2.5 has 1,500
    modules holding tensors. A reversal that does not carry the item's index through is done again, as it is.
    """

    def __init__(self, root: nn.Module, lists: set[str]) -> None:
        self.root = root
        self.lists = lists
        self.done: dict[tuple[Any, ...], tuple[int, dict[str, Shape]]] = {}

    def __call__(self, path: str, state: dict[str, torch.Tensor]) -> dict[str, Shape]:
        segments = path.split(".")
        position = next(
            (i for i, part in enumerate(segments) if part.isdigit() and ".".join(segments[:i]) in self.lists), None
        )
        if position is None:
            return checkpoint_shapes(self.root, state)
        index = int(segments[position])
        template = (*segments[:position], "{}", *segments[position + 1 :])
        relative = tuple(
            sorted((name[len(path) :], tensor_shape(tensor), tensor.dtype) for name, tensor in state.items())
        )
        key = (template, relative)
        if key not in self.done:
            self.done[key] = (index, checkpoint_shapes(self.root, state))
            return self.done[key][1]
        first, shapes = self.done[key]
        renamed: dict[str, Shape] = {}
        for name, size in shapes.items():
            moved = _renumber(name, first, index)
            if moved is None:
                return checkpoint_shapes(self.root, state)
            renamed[moved] = size
        return renamed


def _renumber(name: str, old: int, new: int) -> str | None:
    """``name`` with its first segment equal to ``old`` made ``new``; None when no segment is."""
    segments = name.split(".")
    if str(old) not in segments:
        return None
    segments[segments.index(str(old))] = str(new)
    return ".".join(segments)


class _Below:
    """What each module's subtree holds, worked out once per module from its children's (a tree walked from every
    module would be walked again below each of its ancestors)."""

    def __init__(self) -> None:
        self.done: dict[int, tuple[frozenset[str], bool]] = {}

    def __call__(self, module: nn.Module) -> tuple[frozenset[str], bool]:
        """The class names in ``module``'s subtree (``module.modules()``'s), and whether the subtree holds a
        parameter."""
        found = self.done.get(id(module))
        if found is None:
            children = [self(child) for child in module.children()]
            found = (
                frozenset({type(module).__name__}).union(*(names for names, _ in children)),
                any(True for _ in module.parameters(recurse=False)) or any(holds for _, holds in children),
            )
            self.done[id(module)] = found
        return found


def _module_record(
    path: str,
    module: nn.Module,
    aliases: Mapping[str, str],
    saved_names: set[str],
    reverted: _RepeatedReversal,
    below: _Below,
) -> ModuleRecord:
    """One module as a plain record: its own tensors, and them as ``save_pretrained`` writes them."""
    prefix = f"{path}." if path else ""
    parameters = dict(module.named_parameters(recurse=False))
    buffers = {n: b for n, b in module.named_buffers(recurse=False) if prefix + n in saved_names}
    state: dict[str, torch.Tensor] = {prefix + n: p for n, p in parameters.items() if prefix + n not in aliases}
    state.update({prefix + n: b for n, b in buffers.items()})
    return ModuleRecord(
        path=path,
        class_name=type(module).__name__,
        is_module_list=_is_module_list(module),
        parameters=tuple(_tensor_record(n, p) for n, p in parameters.items()),
        buffers=tuple(_tensor_record(n, b) for n, b in buffers.items()),
        checkpoint=reverted(path, state) if state else {},
        children_own_parameters=any(below(child)[1] for child in module.children()),
        children={name: type(child).__name__ for name, child in module.named_children()},
        classes_below=below(module)[0],
        epsilon=_epsilon(module),
        padding_index=_padding_index(module),
        weight_shape=_weight_shape(module),
        routing=_routing(module),
        sizes=_sizes(module),
        config_sizes=_config_sizes(module),
        sliding_window=_sliding_window(module),
        nn_class=_nn_class(module),
    )


def _routing(module: nn.Module) -> dict[str, int]:
    """The module's own top-k and expert-count attributes, else its config's (``ModuleRecord.routing``)."""
    names = (*TOP_K_ATTRIBUTES, *EXPERT_COUNT_ATTRIBUTES)
    own = _counts(module, names)
    return own if own else _counts(getattr(module, "config", None), names)


def _counts(holder: object, names: Iterable[str]) -> dict[str, int]:
    """The attributes of ``holder`` among ``names`` that are integers (not booleans)."""
    found: dict[str, int] = {}
    for name in names:
        value = attribute(holder, name)
        if isinstance(value, int) and not isinstance(value, bool):
            found[name] = value
    return found


def _config_layer_types(modules: Mapping[str, nn.Module], path: str) -> tuple[str, ...]:
    """The ``layer_types`` of the config the list's owner holds, when they name one kind per item of the list."""
    owner = modules.get(path.rpartition(".")[0])
    types = attribute(attribute(owner, "config"), "layer_types")
    items = sum(1 for _ in modules[path].children())
    if isinstance(types, list | tuple) and len(types) == items and all(isinstance(kind, str) for kind in types):
        return tuple(types)
    return ()


# --- the module tree as plain data ------------------------------------------------------------------


def _is_module_list(module: nn.Module) -> bool:
    from torch import nn

    return isinstance(module, nn.ModuleList)


def _tensor_record(name: str, tensor: torch.Tensor) -> TensorRecord:
    return TensorRecord(name=name, shape=tensor_shape(tensor), dtype=safetensors_dtype(str(tensor.dtype)))


def _epsilon(module: nn.Module) -> float | None:
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    return eps if isinstance(eps, float) else None


def _padding_index(module: nn.Module) -> int | None:
    padding = getattr(module, "padding_idx", None)
    return padding if isinstance(padding, int) else None


def _integers(values: Mapping[str, Any]) -> dict[str, int]:
    """The public, non-boolean integer entries of an attribute mapping, indices (``layer_idx``) left out."""
    return {
        name: value
        for name, value in values.items()
        if isinstance(value, int)
        and not isinstance(value, bool)
        and not name.startswith("_")
        and not name.endswith(INDEX_SUFFIXES)
    }


INDEX_SUFFIXES = ("_idx", "_id", "_index", "layer_number")
"""Ends of attribute names that place a module (``layer_idx``, ``pad_token_id``) rather than size its tensors."""

NOT_SIZE_WORDS = ("window", "position", "theta", "key_value_groups", "chunk", "step")
"""Words in the name of a module's integer attribute that is a length or a ratio, never a tensor's width
(``sliding_window``, ``num_key_value_groups``: query heads per key head)."""


def _sliding_window(module: nn.Module) -> int | None:
    """The window the module's own layer attends within: its ``sliding_window`` attribute, unless the layer says it
    does not use it (EXAONE-4 sets the window on every layer and decides with ``is_sliding``; a layer whose type is
    ``full_attention``), or the config's where the module's class passes that to attention as it runs (Phi-3,
    StarCoder2, Ministral-3), else, in a layer of type ``chunked_attention``, the chunk (``attention_chunk_size``),
    which transformers' cache keeps as a window."""
    own = vars(module)
    kind = _layer_type(module)
    window = own.get("sliding_window")
    kind_of_module: type = type(module)
    if "sliding_window" not in own and _passes_config_window(kind_of_module):  # Phi-3, StarCoder2, Ministral-3
        window = attribute(own.get("config"), "sliding_window")
    if kind == "chunked_attention" and not _positive(window):
        window = own.get("attention_chunk_size", attribute(own.get("config"), "attention_chunk_size"))
    if not _positive(window) or own.get("is_sliding") is False or kind == "full_attention":
        return None
    assert isinstance(window, int)
    return window


@functools.cache
def _passes_config_window(kind: type) -> bool:
    """Whether a module class's ``forward`` hands its config's ``sliding_window`` to attention when it runs
    (``sliding_window=getattr(self.config, "sliding_window", None)``) rather than keeping one of its own: read off the
    method's source, as the class defines it (never run)."""
    forward = getattr(kind, "forward", None)
    try:
        source = inspect.getsource(forward) if forward is not None else ""
    except (OSError, TypeError):  # no source to read (a compiled or dynamically made method)
        return False
    return bool(CONFIG_WINDOW.search(source))


CONFIG_WINDOW = re.compile(
    r"sliding_window\s*=\s*(getattr\(\s*self\.config\s*,\s*[\"']sliding_window[\"']|self\.config\.sliding_window)"
)
"""A keyword argument that passes the config's window at call time."""


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _layer_type(module: nn.Module) -> str | None:
    """The kind of layer a module is in: its own ``layer_type`` (or ``attention_type``), else the ``layer_types``
    entry of its config at its ``layer_idx``."""
    own = vars(module)
    for name in ("layer_type", "attention_type"):
        if isinstance(own.get(name), str):
            return str(own[name])
    index, types = own.get("layer_idx"), attribute(own.get("config"), "layer_types")
    if isinstance(index, int) and isinstance(types, list | tuple) and 0 <= index < len(types):
        kind = types[index]
        return kind if isinstance(kind, str) else None
    return None


def _nn_class(module: nn.Module) -> str | None:
    """The nearest torch layer class ``module`` is or derives from (``ModuleRecord.nn_class``)."""
    from torch import nn

    base = next(base for base in type(module).__mro__ if base.__module__.startswith("torch."))
    return None if base is nn.Module else base.__name__


def _sizes(module: nn.Module) -> dict[str, int]:
    """The integer attributes the model's own code set on ``module``: not for torch's layers, which only restate
    their tensors' shapes (``out_features``)."""
    from torch import nn

    torch_base = next(base for base in type(module).__mro__ if base.__module__.startswith("torch."))
    if torch_base is not nn.Module:  # a torch layer, or a subclass of one (a scaled Embedding)
        return {}
    return {
        name: value for name, value in _integers(vars(module)).items() if not any(w in name for w in NOT_SIZE_WORDS)
    }


def _config_sizes(module: nn.Module) -> dict[str, int]:
    """The integer values of the config ``module`` holds, its text sub-config's prefixed ``text_config.``."""
    from transformers import PretrainedConfig

    config = vars(module).get("config")
    if not isinstance(config, PretrainedConfig):
        return {}
    sizes = _integers(vars(config))
    text = config.get_text_config()
    if text is not config:
        sizes.update({f"text_config.{name}": value for name, value in _integers(vars(text)).items()})
    return sizes


def _weight_shape(module: nn.Module) -> Shape | None:
    weight = getattr(module, "weight", None)
    shape = tuple(int(size) for size in getattr(weight, "shape", ()))
    return shape if len(shape) == 2 else None


def _input_embeddings_path(root: nn.Module, paths: Mapping[int, str]) -> str | None:
    getter = getattr(root, "get_input_embeddings", None)
    try:
        module = getter() if getter is not None else None
    except (AttributeError, NotImplementedError):
        return None
    return paths.get(id(module)) if module is not None else None
