"""Facts of transformers' config classes, asked of the installed transformers: whether it ships a model_type, the
class that reads it, what that class holds when given no arguments (``config_defaults``), and its tensor- and
expert-parallel plans (``parallel_plans``).

Imports transformers inside functions (through ``archviz.transformers.internals``): importing it costs nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archviz.common.errors import InputError
from archviz.common.versions import installed_versions
from archviz.transformers import internals

if TYPE_CHECKING:
    from archviz.cost.parallel_plans import ParallelPlans
    from archviz.families.registry import Family
    from archviz.graph.nodes import Graph


def transformers_ships(model_type: str) -> bool:
    """Whether the installed transformers has a config class (so modeling code) for ``model_type``."""
    return internals.config_class(model_type) is not None


def transformers_config_class(model_type: str, config_path: str) -> Any:
    """transformers' config class for a model_type; ``InputError`` naming ``config_path`` when it has none."""
    found = internals.config_class(model_type)
    if found is None:
        raise InputError(
            f"transformers has no model_type {model_type!r} (it may need the model's own code)",
            path=config_path,
        )
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigDefaults:
    """What transformers' config class for a model_type holds when given no arguments: the value a config that
    leaves a key out gets."""

    witness: str
    """``transformers 5.24.0's DeepseekV3Config()``: the class asked, and the release."""
    values: Mapping[str, Any]
    """The instance as JSON (``to_json_string(use_diff=False)``), sub-configs nested."""


RENAMED_KEYS: Mapping[str, str] = {"torch_dtype": "dtype"}
"""Config keys transformers renamed and still reads under their old name, as the new one: every config class's
``PretrainedConfig.__init__`` takes ``torch_dtype`` as ``dtype`` ("BC for the `torch_dtype` argument")."""


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


def known_defaults(model_type: str) -> ConfigDefaults:
    """``config_defaults(model_type)``, kept in the description cache (``archviz.inputs.cache``) for this transformers
    version: a second comparison of the same model types imports nothing."""
    from archviz.inputs.cache import cached_answer

    def ask(question: str) -> dict[str, Any]:
        found = config_defaults(question)
        return {"witness": found.witness, "values": found.values}

    held = cached_answer("defaults", model_type, ask)
    return ConfigDefaults(witness=held["witness"], values=held["values"])


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


def attribute(holder: object, name: str) -> object:
    """``getattr(holder, name, None)``, None too where reading it raises: a heterogeneous config refuses to give a
    per-layer value such as ``num_local_experts`` globally (``AmbiguousGlobalPerLayerAttributeError``)."""
    try:
        return getattr(holder, name, None)
    except Exception:  # a config's own refusal, whatever its type: the value is then not one archviz can read
        return None


def model_parallel_plans(graph: Graph, family: Family) -> ParallelPlans | None:
    """The tensor- and expert-parallel plans a model's weights are split by: its hand-written family's restatement,
    else transformers' own for its model type (``parallel_plans``, asked once, then read from the description cache);
    None where transformers' classes have none."""
    from archviz.cost.parallel_plans import ParallelPlans, restated_plans
    from archviz.inputs.cache import cached_answer

    restated = restated_plans(graph, family)
    if restated is not None:
        return restated

    def ask(model_type: str) -> dict[str, Any] | None:
        found = parallel_plans(model_type)
        return None if found is None else dataclasses.asdict(found)

    held = cached_answer("plans", graph.model.transformers_model_type, ask)
    return None if held is None else ParallelPlans(**held)
