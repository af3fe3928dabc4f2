"""Build the real transformers model on torch's meta device, and read off what it holds.

This is the second of archviz's three witnesses (analytic graph, meta model, checkpoint header): the
modeling code transformers ships, instantiated on the ``meta`` device so that no weight is allocated,
and asked for its parameters, buffers, tied weights and, by a forward pass on meta tensors, the shape
that every module outputs.

transformers 5 keeps some weights in a different layout from the checkpoints on the Hub (MoE experts
fused into one ``[E, 2I, d]`` tensor instead of one ``[I, d]`` tensor per expert and projection). The
names and shapes reported here are put back into checkpoint layout with transformers' own save path
(``remove_tied_weights_from_state_dict`` then ``revert_weight_conversion``, exactly what
``save_pretrained`` runs), so no second table of expert names exists in archviz.

It is one of the modules that may import torch and transformers (``archviz.verify.TORCH_MODULES`` lists them all); it
reaches every private or unstable transformers API through ``archviz.verify.transformers_internals`` and imports them
inside functions: importing ``archviz.verify.meta`` for its dataclasses costs nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
import math
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archviz.code.modeltree import (
    EXPERT_COUNT_ATTRIBUTES,
    TOP_K_ATTRIBUTES,
    BuildRecord,
    ModelCode,
    ModuleRecord,
    ModuleTree,
    Shape,
    TensorRecord,
)
from archviz.code.pins import content_hash
from archviz.common.dtypes import safetensors_dtype
from archviz.common.errors import InputError, raised_in_archviz
from archviz.common.versions import installed_versions
from archviz.inputs.recipe import CodeRequest, ModelRecipe
from archviz.verify import transformers_internals as internals
from archviz.verify.tracing import first_line, trace_shapes

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel

    from archviz.cost.parallel_plans import ParallelPlans

# config.json keys dropped before transformers sees them. Each would make transformers build something
# other than the plain architecture, or reach outside transformers:
# - auto_map names classes in the model folder's own .py files (remote code);
# - quantization_config / compression_config would make a loader swap nn.Linear for quantized linears;
# - model_type is the caller's choice, passed separately (Kimi-K2 says "kimi_k2" but is built as
#   "deepseek_v3"); left in, it would be stored on the config and hide the family's conversion mapping.
_DROPPED_CONFIG_KEYS = frozenset({"auto_map", "quantization_config", "compression_config", "model_type"})

# auto_map entries tried, in order, for the model class when remote code is allowed.
_REMOTE_MODEL_AUTO_CLASSES = ("AutoModelForCausalLM", "AutoModel")


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
    """Number of parameter elements, each tied weight counted once; equals the sum over
    :attr:`parameters` and over :attr:`module_parameters`."""
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
    module, built = _instantiate_on_meta(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)
    with _naming_fails_on(recipe, module):
        return describe_meta_module(module, built=built)


@contextmanager
def _naming_fails_on(recipe: ModelRecipe, module: nn.Module) -> Iterator[None]:
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
    return _instantiate_on_meta(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)[0]


def describe_meta_module(module: nn.Module, *, built: BuildRecord | None = None) -> MetaModel:
    """Read parameters, buffers and tied weights off a (meta-device) transformers model."""
    module_parameters = {name: _shape(p) for name, p in module.named_parameters()}
    parameter_names = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    full_state = module.state_dict()
    saved_state = _saved_state_dict(module, dict(full_state))
    parameter_state = {k: v for k, v in saved_state.items() if k in parameter_names}
    buffer_state = {k: v for k, v in saved_state.items() if k not in parameter_names}
    persistent_module_names = {k for k in full_state if k not in parameter_names}
    non_persistent = {name: _shape(b) for name, b in module.named_buffers() if name not in persistent_module_names}
    config = getattr(module, "config", None)
    with _one_conversion_mapping(module):
        parameters = checkpoint_shapes(module, parameter_state)
        persistent_buffers = checkpoint_shapes(module, buffer_state)
    return MetaModel(
        class_name=type(module).__name__,
        model_type=str(getattr(config, "model_type", "")),
        parameters=parameters,
        module_parameters=module_parameters,
        persistent_buffers=persistent_buffers,
        non_persistent_buffers=non_persistent,
        tied=_tied_pairs(module, saved_state),
        total_parameters=sum(p.numel() for p in module.parameters()),
        total_persistent_buffer_elements=sum(math.prod(_shape(full_state[name])) for name in persistent_module_names),
        module=module,
        built=built,
    )


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
    with _naming_fails_on(request.recipe, meta.module):
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
    with _one_conversion_mapping(root):
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
        relative = tuple(sorted((name[len(path) :], _shape(tensor), tensor.dtype) for name, tensor in state.items()))
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
        value = _attribute(holder, name)
        if isinstance(value, int) and not isinstance(value, bool):
            found[name] = value
    return found


def _attribute(holder: object, name: str) -> object:
    """``getattr(holder, name, None)``, None too where reading it raises: a heterogeneous config refuses to give a
    per-layer value such as ``num_local_experts`` globally (``AmbiguousGlobalPerLayerAttributeError``)."""
    try:
        return getattr(holder, name, None)
    except Exception:  # a config's own refusal, whatever its type: the value is then not one archviz can read
        return None


def _config_layer_types(modules: Mapping[str, nn.Module], path: str) -> tuple[str, ...]:
    """The ``layer_types`` of the config the list's owner holds, when they name one kind per item of the list."""
    owner = modules.get(path.rpartition(".")[0])
    types = _attribute(_attribute(owner, "config"), "layer_types")
    items = sum(1 for _ in modules[path].children())
    if isinstance(types, list | tuple) and len(types) == items and all(isinstance(kind, str) for kind in types):
        return tuple(types)
    return ()


def load_time_names(module: nn.Module, names: Iterable[str]) -> dict[str, str]:
    """Each checkpoint name as transformers renames it to load it into ``module`` (a ``PreTrainedModel``; any other
    module keeps the names): two spellings of one tensor — a release's and transformers' lossy save of it, Kimi-K2.5's
    ``language_model.model.layers.1…`` and ``language_model.model.blocks.1…`` — come out the same."""
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        return {name: name for name in names}
    return internals.load_time_names(module, names)


def transformers_ships(model_type: str) -> bool:
    """Whether the installed transformers has a config class (so modeling code) for ``model_type``."""
    return internals.config_class(model_type) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigDefaults:
    """What transformers' config class for a model_type holds when given no arguments: the value a config that
    leaves a key out gets."""

    witness: str
    """``transformers 5.24.0's DeepseekV3Config()``: the class asked, and the release."""
    values: Mapping[str, Any]
    """The instance as JSON (``to_json_string(use_diff=False)``), sub-configs nested."""


def config_defaults(model_type: str) -> ConfigDefaults:
    """The defaults of transformers' config class for ``model_type``, instantiated without arguments; for a
    model_type transformers does not ship (or whose class needs arguments), ``PretrainedConfig``'s, the keys every
    config has. The generation parameters a config drops on load take ``generate``'s defaults."""
    import transformers

    found = internals.config_class(model_type)
    with internals.errors_only_logging():
        try:
            instance = (found or transformers.PretrainedConfig)()
        except (TypeError, ValueError):  # a class that cannot stand without arguments: the base class's defaults
            instance = transformers.PretrainedConfig()
    return ConfigDefaults(
        witness=f"transformers {installed_versions().transformers}'s {type(instance).__name__}()",
        values=_with_generation_defaults(json.loads(instance.to_json_string(use_diff=False)), instance),
    )


def _with_generation_defaults(values: dict[str, Any], config: Any) -> dict[str, Any]:
    """A config's defaults (``values``, read off ``config``) and, for the generation parameters every config drops
    on load, ``generate``'s own defaults (a config.json written by an older release still carries them), in each of
    its sub-configs too."""
    for key in internals.sub_config_keys(type(config)):
        sub = getattr(config, key, None)
        if isinstance(values.get(key), dict) and sub is not None:
            values[key] = _with_generation_defaults(values[key], sub)
    return {**internals.generation_defaults(), **values}


def parallel_plans(model_type: str) -> ParallelPlans | None:
    """transformers' tensor- and expert-parallel plans for ``model_type``: its config class's
    ``base_model_tp_plan`` and ``base_model_ep_plan``, and its causal LM's ``_tp_plan``; None when the config class has
    no tensor-parallel plan."""
    from archviz.cost.parallel_plans import ParallelPlans

    found = internals.config_class(model_type)
    if found is None:
        return None
    carrier = found
    if not getattr(found, "base_model_tp_plan", None):  # a wrapper: its language model's config class has the plans
        text = internals.text_config_class(found)
        carrier = text if text is not None else found
    tp = getattr(carrier, "base_model_tp_plan", None)
    if not tp:
        return None
    ep = getattr(carrier, "base_model_ep_plan", None)
    causal_lm = dict(internals.auto_model_mappings())["AutoModelForCausalLM"]
    model_class = next((causal_lm.get(item, None) for item in (found, carrier) if causal_lm.get(item, None)), None)
    if isinstance(model_class, tuple):
        model_class = model_class[0]
    head = dict(getattr(model_class, "_tp_plan", None) or {})
    return ParallelPlans(
        tp=dict(tp),
        ep=dict(ep) if ep else None,
        head=head,
        source=f"transformers' {carrier.__name__} and {getattr(model_class, '__name__', 'no causal LM class')}",
    )


# --- building -------------------------------------------------------------------------------------


def _instantiate_on_meta(
    recipe: ModelRecipe, *, trust_remote_code: bool, model_dir: Path | None
) -> tuple[nn.Module, BuildRecord]:
    import torch

    config_path = recipe.config_path
    hf_config, model_class, remote_notes = _read_config(
        recipe, trust_remote_code=trust_remote_code, model_dir=model_dir
    )
    normalisations = list(recipe.normalisations)
    if model_class is None:
        model_class, build_config, chosen_by = _native_model_class(hf_config, recipe, normalisations)
    else:
        build_config, chosen_by = hf_config, "auto_map names it in the model folder's own code (--trust-remote-code)"
        normalisations = [item for item in normalisations if not item.startswith("auto_map")] + remote_notes
    try:
        with torch.device("meta"), warnings.catch_warnings():
            # An empty module a config asks for (n_shared_experts: 0) is no fault of the config's: say nothing.
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
            module = internals.instantiate(model_class, build_config, dtype=recipe.dtype)
    except (Exception, SystemExit) as exc:  # a config value the modeling code cannot build; remote code's sys.exit
        if raised_in_archviz(exc):
            raise
        whose = "transformers" if model_class.__module__.startswith("transformers.") else "the model's own code"
        raise InputError(
            f"{whose} cannot build {model_class.__name__} from this config: {type(exc).__name__}: {first_line(exc)}",
            path=config_path,
        ) from exc
    if not model_class.__module__.startswith("transformers."):  # the model's own code
        from archviz.verify.remote_compat import untied_list_as_mapping

        if untied_list_as_mapping(module):
            normalisations.append(
                "the model's own code lists its tied weights as transformers 4.x did; with tie_word_embeddings false "
                "nothing is tied, and the built model is given transformers 5's empty mapping"
            )
    built = _build_record(module, model_class, hf_config, recipe, chosen_by, normalisations, model_dir)
    read = _sub_configs_built(module, hf_config) if build_config is hf_config else ("text_config",)
    return module, dataclasses.replace(built, read_configs=read)


def _read_config(recipe: ModelRecipe, *, trust_remote_code: bool, model_dir: Path | None) -> tuple[Any, Any, list[str]]:
    """The recipe's config as transformers' config class (the model folder's own, under ``--trust-remote-code``)
    reads it, the model class the folder's code names (None for transformers' own), and what archviz lent that code
    to import it (``_remote_classes``)."""
    config_path = recipe.config_path
    # A deep copy: transformers rewrites nested values in place (rope_scaling gains rope_type, a wrapper's
    # text_config its model_type) and the caller's parsed config.json must stay as the user wrote it.
    settings = copy.deepcopy({key: value for key, value in recipe.config.items() if key not in _DROPPED_CONFIG_KEYS})
    auto_map = recipe.config.get("auto_map")
    config_class: Any = None
    model_class: Any = None
    remote_notes: list[str] = []
    if trust_remote_code and model_dir is not None and isinstance(auto_map, dict):
        config_class, model_class = _remote_classes(auto_map, model_dir, recipe, remote_notes)
    if config_class is None:
        config_class = transformers_config_class(recipe.model_type, config_path)
    try:
        return config_class.from_dict(settings), model_class, remote_notes
    except Exception as exc:  # transformers validates in __init__ with many exception types
        if raised_in_archviz(exc):
            raise
        raise InputError(
            f"transformers rejects this {recipe.model_type} config: {type(exc).__name__}: {first_line(exc)}",
            path=config_path,
        ) from exc


def layer_kinds(recipe: ModelRecipe, *, trust_remote_code: bool = False, model_dir: Path | None = None) -> list[Any]:
    """What sets each decoder layer of the recipe's model apart, as transformers' config object has it: for layer
    ``i``, the ``i``-th entry of every per-layer list the text config holds (``layer_types``, ``mlp_layer_types``,
    Gemma-4's ``kv_sharing_modes``, Llama-4's ``no_rope_layers``), so that a witness cut to the fewest leading layers
    can hold one layer of every kind the model has, whatever a graph read of them."""
    config, _, _ = _read_config(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)
    text = config.get_text_config()
    depth = _attribute(text, "num_hidden_layers")
    if not isinstance(depth, int) or depth <= 0:
        return []
    lists = []
    for name in sorted({*vars(text), *PER_LAYER_PROPERTIES}):
        value = _attribute(text, name)
        if isinstance(value, list | tuple) and len(value) == depth and all(_hashable(item) for item in value):
            lists.append(value)
    return [tuple(values[i] for values in lists) for i in range(depth)]


PER_LAYER_PROPERTIES = ("kv_sharing_modes", "layers_block_type")
"""Per-layer lists transformers' config classes compute as properties rather than store."""


def _hashable(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _sub_configs_built(module: nn.Module, hf_config: Any) -> tuple[str, ...]:
    """The config's sub-configs the built model holds a module of (a module whose ``config`` is that sub-config: the
    vision tower's is ``vision_config``); a sub-config no module holds was not built (MoshiForCausalLM leaves out its
    audio encoder and depth decoder), whatever the config class declares."""
    keys = internals.sub_config_keys(type(hf_config))
    if not keys:
        return ()
    held = {id(config) for part in module.modules() if (config := getattr(part, "config", None)) is not None}
    return tuple(key for key in keys if id(getattr(hf_config, key, None)) in held)


def _build_record(
    module: nn.Module,
    model_class: Any,
    hf_config: Any,
    recipe: ModelRecipe,
    chosen_by: str,
    normalisations: list[str],
    model_dir: Path | None,
) -> BuildRecord:
    import transformers
    from transformers import PreTrainedModel

    source = Path(inspect.getsourcefile(model_class) or "")
    native = model_class.__module__.startswith("transformers.")
    if native:
        revision = f"v{transformers.__version__}"
    else:
        local = (model_dir / source.name) if model_dir is not None else source
        revision = content_hash(local.read_bytes()) if local.is_file() else "unknown"
    dtype = getattr(module, "dtype", None)
    return BuildRecord(
        class_name=model_class.__name__,
        config_class=type(hf_config).__name__,
        model_type=recipe.model_type,
        chosen_by=chosen_by,
        module_file=source.name,
        origin="transformers" if native else "remote",
        revision=revision,
        dtype=str(dtype).removeprefix("torch.") if dtype is not None else "unknown",
        normalisations=tuple(normalisations),
        kept_in_float32=internals.kept_in_float32(module) if isinstance(module, PreTrainedModel) else (),
        kept_from_quantization=(
            internals.kept_from_quantization(module) if isinstance(module, PreTrainedModel) else ()
        ),
    )


def transformers_config_class(model_type: str, config_path: str) -> Any:
    """transformers' config class for a model_type; ``InputError`` naming ``config_path`` when it has none."""
    found = internals.config_class(model_type)
    if found is None:
        raise InputError(
            f"transformers has no model_type {model_type!r} (it may need the model's own code)",
            path=config_path,
        )
    return found


# Auto classes whose registries are consulted for a config's class, by the task an ``architectures`` name ends in.
_TASK_AUTO_CLASSES = (
    ("ForCausalLM", ("AutoModelForCausalLM",)),
    ("ForConditionalGeneration", ("AutoModelForImageTextToText", "AutoModelForMultimodalLM")),
)


def _native_model_class(hf_config: Any, recipe: ModelRecipe, normalisations: list[str]) -> tuple[Any, Any, str]:
    """The class transformers builds for the config, the config to build it from, and why that class.

    The class ``architectures`` names when transformers exports it (also spelled with its underscores,
    ``KimiK25…`` for ``Kimi_K25…``); else the Auto class of the task its name implies, else — a wrapper with a
    ``text_config`` first looking for its whole model (image-text-to-text), a plain model for its causal LM — the
    first registry that knows the config, base model last. A class whose config class is the wrapper's text
    sub-config is built from that sub-config, as ``AutoModel*.from_config`` does.
    """
    import transformers

    architecture = recipe.architecture
    config_type = type(hf_config)
    if architecture is not None:
        named = getattr(transformers, architecture, None)
        if isinstance(named, type) and isinstance(hf_config, getattr(named, "config_class", ()) or ()):
            return named, hf_config, f"the class the config's architectures names ({architecture})"
    mappings = dict(internals.auto_model_mappings())
    registered = {
        auto_name: list(found) if isinstance(found, list | tuple) else [found]
        for auto_name, mapping in mappings.items()
        if config_type in mapping
        for found in [mapping[config_type]]
    }
    wanted = (architecture or "").replace("_", "")
    for auto_name, classes in registered.items():
        for candidate in classes:
            if wanted and candidate.__name__.replace("_", "") == wanted:
                said = f"the class the config's architectures names ({architecture}), spelled {candidate.__name__}"
                return (*_with_text_config(candidate, hf_config, auto_name, normalisations), said)
    text_config = internals.text_config_class(config_type)
    preferred = next((names for suffix, names in _TASK_AUTO_CLASSES if wanted.endswith(suffix)), ())
    default = ("AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModelForMultimodalLM", "AutoModel")
    if text_config is not None:  # a wrapper: its whole model before its language model alone
        default = ("AutoModelForImageTextToText", "AutoModelForMultimodalLM", "AutoModelForCausalLM", "AutoModel")
    for auto_name in dict.fromkeys((*preferred, *default)):
        if auto_name in registered:
            candidate = registered[auto_name][0]
            named = (
                f"architectures names {architecture}, which transformers does not export"
                if architecture
                else "the config names no architectures"
            )
            said = f"{auto_name}'s class for {config_type.__name__} ({named})"
            return (*_with_text_config(candidate, hf_config, auto_name, normalisations), said)
    raise InputError(f"transformers has no model class for model_type {recipe.model_type!r}", path=recipe.config_path)


def _with_text_config(model_class: Any, hf_config: Any, auto_name: str, normalisations: list[str]) -> tuple[Any, Any]:
    """The class and the config to build it from: the text sub-config when that is the class's config class."""
    text_config = internals.text_config_class(type(hf_config))
    if text_config is not None and getattr(model_class, "config_class", None) is text_config:
        normalisations.append(
            f"{model_class.__name__} is built from the config's text_config alone, as {auto_name}.from_config does"
        )
        return model_class, hf_config.get_text_config()
    return model_class, hf_config


def _remote_classes(
    auto_map: dict[str, Any], model_dir: Path, recipe: ModelRecipe, notes: list[str]
) -> tuple[Any, Any]:
    """The config and model classes ``auto_map`` names in the model folder's own code (``None`` if not named).

    Only ever called with the user's explicit trust: this imports and runs the folder's .py files, unchanged, with the
    names older transformers releases had lent for the import (``archviz.verify.remote_compat``). A config class named
    in a file the folder lacks (a release's ``configuration_deepseek.py`` not copied beside its modeling file) is
    transformers' own for the model_type the config is read as, standing in under the name the code imports; each such
    step is said in ``notes``.
    """
    from transformers import PretrainedConfig, PreTrainedModel

    from archviz.verify.remote_compat import stand_in_config

    model_reference = next((auto_map[name] for name in _REMOTE_MODEL_AUTO_CLASSES if auto_map.get(name)), None)
    config_reference = auto_map.get("AutoConfig")
    stand_in = None
    if isinstance(config_reference, str) and not (model_dir / _module_file(config_reference)).is_file():
        stand_in = transformers_config_class(recipe.model_type, recipe.config_path)
        notes.append(
            f"auto_map names {config_reference}, whose file the model folder lacks: transformers' "
            f"{stand_in.__name__} (model_type {recipe.model_type!r}) stands in for it, keeping every key of the config "
            "as an attribute as the releases' own config classes do"
        )
    config_class, model_class = (stand_in_config(stand_in) if stand_in is not None else None), None
    with _importable_folder(model_dir, config_reference, stand_in) as folder:
        if stand_in is None and isinstance(config_reference, str):
            found = _import_remote_class(config_reference, folder, model_dir, recipe.config_path, notes)
            config_class = _subclass_of(PretrainedConfig, found, config_reference, recipe.config_path)
        if isinstance(model_reference, str):
            found = _import_remote_class(model_reference, folder, model_dir, recipe.config_path, notes)
            model_class = _subclass_of(PreTrainedModel, found, model_reference, recipe.config_path)
    return config_class, model_class


def _subclass_of(base: type, found: Any, reference: str, config_path: str) -> Any:
    """``found``, refused when it is not a subclass of transformers' ``base``."""
    if not (isinstance(found, type) and issubclass(found, base)):
        raise InputError(
            f"auto_map names {reference} in the model's own code, which is {_kind(found)}, not a subclass of "
            f"transformers' {base.__name__}",
            path=config_path,
        )
    return found


def _module_file(reference: str) -> str:
    """The file an ``auto_map`` reference's module is in (``configuration_deepseek.DeepseekV3Config`` ->
    ``configuration_deepseek.py``); a reference into another repo (``repo--module.Class``) by its module."""
    return f"{reference.split('--')[-1].rpartition('.')[0]}.py"


@contextmanager
def _importable_folder(model_dir: Path, config_reference: Any, stand_in: Any) -> Iterator[Path]:
    """The model folder, or (a config class standing in for a file it lacks) a copy of its .py files in a temporary
    folder of the same name, beside a module of that file's name that imports transformers' class under the name the
    code imports. The user's folder is never written to."""
    if stand_in is None or not isinstance(config_reference, str):
        yield model_dir
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="archviz-remote-") as scratch:
        folder = Path(scratch) / model_dir.name
        folder.mkdir()
        for source in model_dir.glob("*.py"):
            shutil.copyfile(source, folder / source.name)
        name = config_reference.rpartition(".")[2]
        (folder / _module_file(config_reference)).write_text(
            f"# Written by archviz: {_module_file(config_reference)} is not in the model folder.\n"
            "from archviz.verify.remote_compat import stand_in_config\n"
            f"from {stand_in.__module__} import {stand_in.__name__}\n\n"
            f"{name} = stand_in_config({stand_in.__name__})\n",
            encoding="utf-8",
        )
        yield folder


def _import_remote_class(reference: str, folder: Path, model_dir: Path, config_path: str, notes: list[str]) -> Any:
    """Import ``reference`` from ``folder`` with older transformers' names lent; what the code raises is its fault."""
    import transformers

    from archviz.verify.remote_compat import COMPATIBILITY_NOTE, older_transformers_names

    try:
        with older_transformers_names() as lent:
            found = internals.class_from_model_code(reference, folder)
    except (Exception, SystemExit) as exc:  # importing runs the model's own code: what it raises is its fault
        raise InputError(
            f"cannot import {reference} from the model's own code in {model_dir}: {type(exc).__name__}: "
            f"{first_line(exc)}",
            path=config_path,
        ) from exc
    if lent:
        note = COMPATIBILITY_NOTE.format(version=f"transformers {transformers.__version__}", names=", ".join(lent))
        if note not in notes:
            notes.append(note)
    return found


def _kind(value: object) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else f"an object of type {type(value).__name__}"


# --- parameters and buffers in checkpoint naming -----------------------------------------------------


@contextmanager
def _one_conversion_mapping(module: nn.Module) -> Iterator[None]:
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        yield
        return
    with internals.one_conversion_mapping(module):
        yield


def _saved_state_dict(module: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What ``save_pretrained`` keeps before reverting conversions: ignored keys and tied aliases go."""
    from transformers import PreTrainedModel

    if not isinstance(module, PreTrainedModel):
        return state
    for key in internals.keys_to_ignore_on_save(module):
        state.pop(key, None)
    return internals.remove_tied_weights(state, module)


def checkpoint_shapes(module: nn.Module, state: dict[str, torch.Tensor]) -> dict[str, Shape]:
    """Rename and reshape ``state`` as a checkpoint stores it, with transformers' save-time reversal.

    ``revert_weight_conversion`` reverses the family's checkpoint conversion mapping (e.g. the fused
    ``experts.gate_up_proj`` ``[E, 2I, d]`` becomes ``experts.{j}.gate_proj.weight`` ``[I, d]`` and
    ``experts.{j}.up_proj.weight``); it runs its ops on meta tensors, so nothing is allocated.

    Layers with the same structure (the same names and shapes below ``layers.{i}``) are reverted once, on a
    representative, and the result is renumbered: Kimi-K2's 60 identical MoE layers cost one reversal, not 60.
    The reversal may rename the path in front of the index (MiniMax-M3's ``model.language_model.layers.{i}`` is
    saved as ``language_model.model.layers.{i}``), so each list of layers is reverted in a call of its own and a
    representative's tensors are found again by their index. If a reversal ever moved a tensor to another index,
    every layer is reverted as it is.
    """
    from transformers import PreTrainedModel

    if not state:
        return {}
    if not isinstance(module, PreTrainedModel):
        return {name: _shape(tensor) for name, tensor in state.items()}
    other: dict[str, torch.Tensor] = {}
    layers: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    for name, tensor in state.items():
        match = _LAYER.match(name)
        if match is None:
            other[name] = tensor
        else:
            layers.setdefault(match["prefix"], {}).setdefault(int(match["index"]), {})[match["rest"]] = tensor
    shapes = {name: _shape(tensor) for name, tensor in _revert(module, other).items()}
    for prefix, items in layers.items():
        reverted = _revert_list(module, prefix, items)
        if reverted is None:  # a reversal moved a tensor into another layer: revert every layer as it is
            return {n: _shape(t) for n, t in _revert(module, state).items()}
        shapes.update(reverted)
    return shapes


def _revert_list(
    module: PreTrainedModel, prefix: str, items: Mapping[int, Mapping[str, torch.Tensor]]
) -> dict[str, Shape] | None:
    """One list of layers (``prefix`` ``model.layers.``) in checkpoint layout, each structure reverted once; None
    when a reverted name no longer carries its representative's index."""
    # The first layer of each structure stands for the others; they are reverted in one call (building the
    # conversion mapping is most of a call's cost).
    representative: dict[tuple[tuple[str, Shape], ...], int] = {}
    stands_for = {
        index: representative.setdefault(tuple(sorted((rest, _shape(t)) for rest, t in members.items())), index)
        for index, members in items.items()
    }
    chosen = set(representative.values())
    batch = {f"{prefix}{index}.{rest}": tensor for index in chosen for rest, tensor in items[index].items()}
    # Reverted name of each representative, split around its index: (text before it, text after it).
    relative: dict[int, list[tuple[str, str, Shape]]] = {index: [] for index in chosen}
    for name, tensor in _revert(module, batch).items():
        segments = name.split(".")
        position = next((i for i, segment in enumerate(segments) if segment.isdigit()), None)
        if position is None or int(segments[position]) not in chosen:
            return None
        before, after = ".".join(segments[:position]), ".".join(segments[position + 1 :])
        relative[int(segments[position])].append((before, after, _shape(tensor)))
    return {
        f"{before}.{index}.{after}" if before else f"{index}.{after}": size
        for index, key in stands_for.items()
        for before, after, size in relative[key]
    }


_LAYER = re.compile(r"^(?P<prefix>(?:.*\.)?layers\.)(?P<index>\d+)\.(?P<rest>.+)$")


def _revert(module: PreTrainedModel, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if not state:
        return {}
    return internals.revert_weight_conversion(module, state)


def _tied_pairs(module: nn.Module, saved_state: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``(alias, source)`` for every parameter reachable under two names; the source is the saved one."""
    names_by_tensor: dict[int, list[str]] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        names_by_tensor.setdefault(id(parameter), []).append(name)
    pairs: list[tuple[str, str]] = []
    for names in names_by_tensor.values():
        if len(names) < 2:
            continue
        saved = [name for name in names if name in saved_state]
        source = saved[0] if saved else names[0]
        pairs.extend((name, source) for name in names if name != source)
    return tuple(sorted(pairs))


def _shape(tensor: torch.Tensor) -> Shape:
    return tuple(int(size) for size in tensor.shape)


# --- the module tree as plain data ------------------------------------------------------------------


def _is_module_list(module: nn.Module) -> bool:
    from torch import nn

    return isinstance(module, nn.ModuleList)


def _tensor_record(name: str, tensor: torch.Tensor) -> TensorRecord:
    return TensorRecord(name=name, shape=_shape(tensor), dtype=safetensors_dtype(str(tensor.dtype)))


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
        window = _attribute(own.get("config"), "sliding_window")
    if kind == "chunked_attention" and not _positive(window):
        window = own.get("attention_chunk_size", _attribute(own.get("config"), "attention_chunk_size"))
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
    index, types = own.get("layer_idx"), _attribute(own.get("config"), "layer_types")
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
