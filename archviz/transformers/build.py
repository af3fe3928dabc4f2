"""Which transformers class is built from a recipe's config, and building it on the meta device.

The recipe's config is read by transformers' config class (the model folder's own under ``--trust-remote-code``,
``archviz.transformers.remote``); the class is the one ``architectures`` names, else the Auto class its task implies;
the module is instantiated inside ``torch.device("meta")`` and described in a ``BuildRecord`` (which class, from which
file, and why). Imports torch and transformers inside functions.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archviz.code.modeltree import BuildRecord
from archviz.code.pins import content_hash
from archviz.common.errors import InputError, raised_in_archviz
from archviz.inputs.recipe import LEFT_OUT_KEYS, ModelRecipe
from archviz.transformers import internals
from archviz.transformers.configs import attribute, transformers_config_class
from archviz.transformers.remote import remote_classes
from archviz.transformers.tracing import first_line

if TYPE_CHECKING:
    from torch import nn


_DROPPED_CONFIG_KEYS = frozenset({*LEFT_OUT_KEYS, "model_type"})
"""config.json keys dropped before transformers sees them: the recipe's ``LEFT_OUT_KEYS`` (each would make transformers
build something other than the plain architecture, or reach outside it), and ``model_type``, the caller's choice,
passed separately (Kimi-K2 says "kimi_k2" but is built as "deepseek_v3"; left in, it would be stored on the config and
hide the family's conversion mapping)."""


def instantiate_on_meta(
    recipe: ModelRecipe, *, trust_remote_code: bool, model_dir: Path | None
) -> tuple[nn.Module, BuildRecord]:
    """The recipe's model instantiated on the meta device, and the record of what was built and why."""
    import torch

    config_path = recipe.config_path
    hf_config, model_class, remote_notes = read_config(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)
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
        from archviz.transformers.remote_compat import untied_list_as_mapping

        if untied_list_as_mapping(module):
            normalisations.append(
                "the model's own code lists its tied weights as transformers 4.x did; with tie_word_embeddings false "
                "nothing is tied, and the built model is given transformers 5's empty mapping"
            )
    built = _build_record(module, model_class, hf_config, recipe, chosen_by, normalisations, model_dir)
    read = _sub_configs_built(module, hf_config) if build_config is hf_config else ("text_config",)
    return module, dataclasses.replace(built, read_configs=read)


def read_config(recipe: ModelRecipe, *, trust_remote_code: bool, model_dir: Path | None) -> tuple[Any, Any, list[str]]:
    """The recipe's config as transformers' config class (the model folder's own, under ``--trust-remote-code``)
    reads it, the model class the folder's code names (None for transformers' own), and what archviz lent that code
    to import it (``remote_classes``)."""
    config_path = recipe.config_path
    # A deep copy: transformers rewrites nested values in place (rope_scaling gains rope_type, a wrapper's
    # text_config its model_type) and the caller's parsed config.json must stay as the user wrote it.
    settings = copy.deepcopy({key: value for key, value in recipe.config.items() if key not in _DROPPED_CONFIG_KEYS})
    auto_map = recipe.config.get("auto_map")
    config_class: Any = None
    model_class: Any = None
    remote_notes: list[str] = []
    if trust_remote_code and model_dir is not None and isinstance(auto_map, dict):
        config_class, model_class = remote_classes(auto_map, model_dir, recipe, remote_notes)
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
    config, _, _ = read_config(recipe, trust_remote_code=trust_remote_code, model_dir=model_dir)
    text = config.get_text_config()
    depth = attribute(text, "num_hidden_layers")
    if not isinstance(depth, int) or depth <= 0:
        return []
    lists = []
    for name in sorted({*vars(text), *PER_LAYER_PROPERTIES}):
        value = attribute(text, name)
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
