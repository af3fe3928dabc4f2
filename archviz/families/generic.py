"""Any model_type transformers ships without a hand-written table: the graph read off the real modeling code.

The model is built on torch's meta device by the meta stage, which hands over its module tree as plain data
(``archviz.code.modeltree.ModuleTree``, read by ``archviz.verify.meta.read_model_code``); this module walks that record:
every module that owns parameters or saved buffers becomes a learned node whose rows are its tensors, named as
``save_pretrained`` writes them (transformers' own weight-conversion reversal, run on that module's
tensors alone, so fused experts come back one tensor per expert). Repeated layers are folded: modules at the
same path in every item of a ``ModuleList`` (``model.layers.{layer}``) with the same class and the same
tensors become one node with a layer placement, and a module whose checkpoint tensors repeat per expert
(``experts.{expert}.w1.weight``) one node with ``{expert}`` instances. Output shapes come from a prefill and a
decode pass on meta tensors (``archviz.code.modeltree.ShapeTrace``); nodes are in the order the forward pass left them.

A fixed size (a tensor's axis, a traced width) is named after what structurally sizes it, never after a config key
that merely has the same value (``CodeGraph._dim``): the candidates are read off the built module and the modules
holding it, nearest first, up to the nearest that holds a config — each one's integer attributes (an attention
module's ``head_dim``, an MLP's ``intermediate_size``, the experts' ``intermediate_dim``), a head count times a head
size of them, then the keys of its config that its role is sized by (an attention module's
``num_key_value_heads``, ``head_dim``…: ``ATTENTION_CONFIG_KEYS``; a model's ``hidden_size`` and ``vocab_size``)
and their head products. The first tier where any candidate has the value decides; two candidates there, or none
anywhere, leave the size a plain number. Each named size's ``Dim.formula`` says where it was read
(``Qwen3_5MoeMLP.intermediate_size``, ``num_key_value_heads × head_dim``). A node is titled by its place and role,
then its class (``vision tower · encoder · layer · attention · q proj · linear (Linear)``: ``CodeGraph._title``),
unique in the graph; a module whose kind archviz does not recognise says so in its summary.

Such a graph describes the code with the code, so it is not an independent witness: ``Graph.not_modelled``
says so (``Graph.derived_from_code``). This module imports neither torch, transformers nor ``archviz.verify.meta``:
``build`` asks the code reader it is handed (the pipeline's) for the model it needs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from archviz.code.finder import class_attributes, find_site
from archviz.code.locators import Category, Locator, Role, attribute, function, method, statement
from archviz.code.modeltree import (
    EXPERT_COUNT_ATTRIBUTES,
    TOP_K_ATTRIBUTES,
    CallKind,
    ModuleRecord,
    ModuleTree,
    ShapeTrace,
)
from archviz.code.pins import SourceFile
from archviz.common.words import first_free
from archviz.families.blocks.builder import (
    BATCH,
    KEY_POSITIONS,
    MODEL_LEVEL,
    POSITIONS,
    TOKENS,
    GraphBuilder,
    checkpoint_dtypes,
    factor,
    layer_placement,
)
from archviz.families.blocks.indexer import LIGHTNING_INDEXER, indexer_nodes
from archviz.families.blocks.mixers import (
    GATED_DELTA_NET,
    LIGHTNING_ATTENTION,
    MAMBA2_MIXER,
    Size,
    gated_delta_nodes,
    lightning_nodes,
    mamba2_nodes,
)
from archviz.families.deepseek_v3 import WORDS as DEEPSEEK_V3_WORDS
from archviz.families.latent_attention import LatentCore, LatentHeads, caches_latent, latent_core_nodes, latent_heads
from archviz.families.omissions import unread_sub_configs, with_omissions
from archviz.families.registry import GENERIC, Family, FamilyBuilds, FamilySpeech
from archviz.graph.naming import NamingMap, Rename
from archviz.graph.nodes import (
    DataEdge,
    Dim,
    Ffn,
    Graph,
    Group,
    GroupKind,
    Layer,
    ModelInfo,
    Node,
    NodeKind,
    Op,
    OpKind,
    Placement,
    Setting,
    Shape,
    TensorRow,
)
from archviz.inputs.recipe import CodeReader, CodeRequest, transformers_recipe
from archviz.inputs.settings import LAYER_COUNT_KEYS, Settings

NAME = GENERIC

# Sizes of the traced passes. Odd, distinct numbers so that a traced size can be read back as a symbol:
# 3 is B, 7 is T (1 in decode), 21 is B·T, and a key axis of 7 in prefill and PAST + 1 in decode is S.
TRACE_BATCH = 3
TRACE_PREFILL = 7
TRACE_PAST = 4

ATTENTION_CONFIG_KEYS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim")
"""The keys of its config an attention module is sized by in transformers' code (``LlamaAttention`` builds
``k_proj`` as ``Linear(config.hidden_size, config.num_key_value_heads * self.head_dim)``)."""

MODEL_CONFIG_KEYS = ("hidden_size", "vocab_size", "text_config.hidden_size", "text_config.vocab_size")
"""The keys of its config any other module holding one is sized by: the width of its stream and its vocabulary
(``embed_tokens = Embedding(config.vocab_size, config.hidden_size)``, a wrapper's head from its text config)."""

HEAD_COUNT = re.compile(r"(?:num_|n_)\w*heads")
"""Names of a head count (``num_key_value_heads``, ``num_v_heads``), which times a head size sizes a projection."""
HEAD_SIZE = re.compile(r"head_(?:\w+_)?dim")
"""Names of a head size (``head_dim``, ``head_v_dim``)."""

# Words in the module path of a vision or audio encoder's repeated blocks, which are not the model's layers.
TOWER_WORDS = ("vision", "visual", "image", "audio", "speech")

WORDS = DEEPSEEK_V3_WORDS
"""What the sentence describing a released configuration reads beyond the common keys: DeepSeek-V3's words, since
DeepSeek-V2 and its kin (their dense layers, MLA's shape) are read off the code."""

LAYER_KEYS = (
    "num_hidden_layers",
    "first_k_dense_replace",
    "moe_layer_freq",
    "layer_types",
    "mlp_only_layers",
    "decoder_sparse_step",
    "num_nextn_predict_layers",
)
"""The keys transformers' configs place layers with (``Graph.layer_keys``): a graph read off the code does not know
which one its classes read, so the overview marks whichever the config sets."""

# Words in the name of a layer's token-mixing child (``self_attn``, ``mixer``, ``mamba``), for the layer map.
MIXER_WORDS = ("attn", "attention", "mixer", "mamba", "ssm", "linear_attn")

# Ends of the class names of a feed-forward module that a layer may hold under a mixer's name (Nemotron-H's ``mixer``
# is its MLP or its MoE in those layers).
FFN_CLASS_ENDS = ("MLP", "Moe", "MoE")

FFN_LAYER_TYPES = {"moe": Ffn.MOE, "mlp": Ffn.DENSE}
"""``layer_types`` entries that name a layer made of a feed-forward part alone, no token mixer (Nemotron-H's
``moe`` and ``mlp`` layers, from its ``hybrid_override_pattern``'s ``E`` and ``-``)."""

NO_MIXER = "none"
"""The layer map's mixer of a layer that mixes no tokens (a Nemotron-H MoE or MLP layer)."""

# Words in the attribute name of a vision encoder beside the language model (Qwen3.5's ``visual``): it runs on images,
# so its parameters are not a text token's active ones.
VISION_WORDS = ("vision", "visual", "image")

# Config keys a norm's epsilon is named after when one of them has the module's value.
EPSILON_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps", "norm_epsilon")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassSummary:
    """What a kind of module does, for modules whose class name matches."""

    suffix: str
    """The end of the class name it applies to (``Linear``, ``RMSNorm``)."""
    summary: str
    """One plain sentence; ``{rows}``/``{cols}`` are filled from its 2-D weight's shape, ``{bias}`` from its
    having a bias."""
    input_rule: str | None
    """How its input shape follows from its output: ``linear`` (the last axis is the weight's ``cols``),
    ``transposed`` (the weight's ``rows``), ``lookup`` (drop the last axis: IDs), ``same``; None when it
    cannot be said."""


# The common module classes, most specific first. Matching by suffix covers the families' own norms
# (``LlamaRMSNorm``, ``GptOssRMSNorm``) and routers.
CLASS_SUMMARIES: tuple[ClassSummary, ...] = (
    ClassSummary(
        suffix="Linear",
        summary="Multiply each vector by a learned {rows}×{cols} matrix{bias}.",
        input_rule="linear",
    ),
    ClassSummary(
        suffix="Embedding",
        summary="Look up a learned {cols}-dimensional vector for each of {rows} IDs.",
        input_rule="lookup",
    ),
    ClassSummary(
        suffix="RMSNormGated",
        summary="Normalize each vector to unit root-mean-square, rescale it with a learned scale and multiply it by "
        "the activated gate it is given.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="RMSNorm",
        summary="Normalize each vector to unit root-mean-square and rescale it with a learned scale.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="LayerNorm",
        summary="Normalize each vector to zero mean and unit variance, then rescale and shift it.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="GroupNorm",
        summary="Normalize each group of channels to zero mean and unit variance, then rescale and shift it.",
        input_rule="same",
    ),
    ClassSummary(
        suffix="Conv1D",
        summary="GPT-2's linear layer, its weight stored transposed: map each {rows}-dimensional vector to {cols} "
        "features{bias}.",
        input_rule="transposed",
    ),
    ClassSummary(
        suffix="Conv1d",
        summary="Slide learned one-dimensional kernels along the sequence.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Conv2d",
        summary="Slide learned two-dimensional kernels over the image.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Conv3d",
        summary="Slide learned three-dimensional kernels over the volume.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Experts",
        summary="A bank of expert feed-forward networks, each applied to the tokens routed to it.",
        input_rule=None,
    ),
    ClassSummary(
        suffix="Router",
        summary="Score every expert for every token and choose the experts each token runs through.",
        input_rule=None,
    ),
)

_ID_UNSAFE = re.compile(r"[^a-z0-9.-]+")


def family(model_type: str) -> Family:
    """The generic family for a model_type transformers ships and no hand-written family accepts."""
    return Family(
        name=NAME,
        model_types=(model_type,),
        architectures=(),
        transformers_model_type=model_type,
        builds=FamilyBuilds(build=build, locators=locators),
        speaks=FamilySpeech(words=WORDS),
    )


MAX_EXPERT_INSTANCES = 65_536
"""Most routed experts (in all layers together) of a model read off its code: the module tree names every expert's
tensors one by one: 32,000 experts in 2 layers took 5 s of a core and 529 MB; a million took 73 s before failing
for memory (Kimi-K2, read by its own family, has 23,040)."""

EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
"""transformers' spellings of a MoE layer's routed-expert count."""


def _bound_what_the_code_builds(settings: Settings) -> None:
    """Refuse, at the key's line, a config whose layer or expert counts would make the real code build more than
    archviz reads (``MAX_LAYERS``, ``MAX_EXPERT_INSTANCES``), before anything is built."""
    layers = [settings.count(key) for key in sorted(LAYER_COUNT_KEYS) if _set(settings, key)]
    counted = list(_layer_counts(settings.document.data, ()))
    if sum(count for _, count in counted) > MAX_CODE_LAYERS:
        where, count = max(counted, key=lambda item: item[1])
        raise settings.document.error_at(
            where,
            f"{count:,} layers: the model's parts hold {sum(c for _, c in counted):,} layers in all, more than "
            f"archviz reads off a model's code ({MAX_CODE_LAYERS:,})",
        )
    for key in EXPERT_COUNT_KEYS:
        if _set(settings, key):
            experts, depth = settings.count(key), max(layers, default=1)
            if experts * max(depth, 1) > MAX_EXPERT_INSTANCES:
                raise settings.fail(
                    (key,),
                    f"{experts:,} experts in each of {depth:,} layers are more than archviz reads off a model's code "
                    f"({MAX_EXPERT_INSTANCES:,} in all)",
                )


MAX_CODE_LAYERS = 2_048
"""The most layers archviz builds and reads off a model's code, every part (text model, vision tower, audio encoder)
together: building and tracing them on the meta device takes about 5 ms a layer, so 2,048 stay within seconds (a
LLaVA with a 10,000-layer vision tower took 54 s). No released model has more than a few hundred."""


def _layer_counts(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], int]]:
    """Every layer count a config sets, in any of its sub-configs, with its key path."""
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        if key in LAYER_COUNT_KEYS and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            yield (*path, key), value
        elif isinstance(value, Mapping) and len(path) < 8:
            yield from _layer_counts(value, (*path, key))


def _set(settings: Settings, key: str) -> bool:
    return settings.has(key) and settings.values[key] is not None


def build(settings: Settings, model: ModelInfo, read_code: CodeReader) -> Graph:
    """The graph of the modeling code transformers ships for ``model.transformers_model_type``.

    ``read_code`` builds the model on the meta device and reads it (the pipeline hands over
    ``archviz.verify.meta.read_model_code``); it runs once the config's layer counts are known to be sane.
    """
    _bound_what_the_code_builds(settings)
    code = read_code(
        CodeRequest(
            recipe=transformers_recipe(settings, model),
            batch=TRACE_BATCH,
            prefill=TRACE_PREFILL,
            past=TRACE_PAST,
        )
    )
    graph = CodeGraph(settings, code.tree, code.trace).build(model)
    built = code.tree.built
    if built is not None and built.class_name != model.architecture:  # the graph is that class's, not the named one
        said = f"architectures names {model.architecture}" if model.architecture else "architectures names no class"
        graph = replace(
            graph,
            not_modelled=(
                *graph.not_modelled,
                f"{said}: the graph is read off {built.class_name}, which transformers built instead "
                f"({built.chosen_by})",
            ),
        )
    if built is not None:
        graph = replace(graph, kept_from_quantization=built.kept_from_quantization)
    reader = f"transformers' {built.class_name}" if built is not None else "transformers' class"
    # A per_layer_config is no part of the model but its layers' own settings, which transformers' config class
    # applies to each layer it builds (Gemma-4's global layers): the graph, read off those layers, has them.
    read = built.read_configs if built is not None else ()
    unread = unread_sub_configs(settings.document, read, reader=reader)
    return with_omissions(graph, [(key, said) for key, said in unread if key not in PER_LAYER_SETTINGS])


PER_LAYER_SETTINGS = ("per_layer_config",)
"""Top-level ``*_config`` keys that hold per-layer settings transformers applies itself, not a part of the model."""


# -- the module tree ------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Instance:
    """One module that owns checkpoint tensors, at one place in the tree."""

    path: str
    """Its module path (``model.layers.3.self_attn.q_proj``)."""
    template: str
    """The path with repeated-list indices as placeholders (``model.layers.{layer}.self_attn.q_proj``)."""
    layer: int | None
    """Its index in the first repeated list on its path."""
    class_name: str
    """Its class."""
    own: tuple[str, ...]
    """Names of the parameters it holds directly."""
    is_container: bool
    """Whether child modules of it own parameters too (then its node is named after its own parameters)."""
    tensors: dict[str, tuple[tuple[int, ...], str, str]]
    """Checkpoint name -> (shape, safetensors dtype, role ``parameter`` or ``buffer``)."""
    shares_with: str | None
    """Module path of the module whose parameter a tied parameter of this one is."""


@dataclass(slots=True, kw_only=True)
class _Folded:
    """Instances with the same template and signature: one node."""

    key: tuple[Any, ...]
    first: _Instance
    rows: list[tuple[str, tuple[int, ...], str, str]]
    """(checkpoint template, shape, dtype, role) per instance."""
    per_item: int = 1
    """Instances per layer (experts) implied by ``{expert}`` in the row templates."""
    instances: list[_Instance] = field(default_factory=list)


def _templated(name: str, layer: int | None) -> str:
    """A checkpoint name with its layer index as ``{layer}``: the first segment equal to the index.

    The layer index is the first number in every name transformers writes for a layer (renamings such as
    Mixtral's ``mlp`` -> ``block_sparse_moe`` change words, not numbers); the manifest test checks it.
    """
    if layer is None:
        return name
    segments = name.split(".")
    if str(layer) in segments:
        segments[segments.index(str(layer))] = "{layer}"
    return ".".join(segments)


class CodeGraph:
    """Turns a meta-device model's module tree and its shape trace into a graph."""

    def __init__(self, s: Settings, tree: ModuleTree, trace: ShapeTrace):
        self.s = s
        self.tree = tree
        self.trace = trace
        dtype, _ = checkpoint_dtypes(s)
        self.b = GraphBuilder(s, dtype=dtype, quantization_block=None)
        self.modules: dict[str, ModuleRecord] = {module.path: module for module in tree.modules}
        self.saved = {**{n: "parameter" for n in tree.parameters}, **{n: "buffer" for n in tree.persistent_buffers}}
        self.whole = {**tree.parameters, **tree.persistent_buffers}
        self.notes: list[str] = []
        self.routing_unknown: list[str] = []
        """Why a bank of experts' routing could not be read, one sentence each."""
        self.banks: dict[str, int] = {}
        """Module path of every bank of routed experts -> its expert count."""
        self.unknown_inputs: list[str] = []
        self.unattributed: list[str] = []
        self.unpriced_modules: list[str] = []
        """Text modules the cost model cannot price, said as ``class at path``."""
        self.cores: list[_Site] = []
        """Every attention core and recurrent mixer added, for the data flow to pass through."""
        self.typed_mixers: set[tuple[str, str]] = set()
        """Template and class of the gated delta nets, Mamba2 mixers and lightning attentions whose work has nodes of
        their own."""
        self.activations: set[str] = set()
        """Module paths of the activations that are nodes (``_is_activation``)."""
        self.trace_order = {path: position for position, path in enumerate(trace.prefill)}
        """Module path -> when the traced prefill pass recorded its output."""
        """Module paths the traced prefill pass recorded an output for."""
        self.node_paths: dict[str, str] = {}
        """Node id -> the module path of its first instance."""
        self._tiers: dict[str, list[list[Dim]]] = {}

    # -- reading the tree -------------------------------------------------------------------------

    def _template(self, path: str) -> tuple[str, int | None]:
        """The path with the index in the first repeated list on it as ``{layer}``, and that index.

        Lists nested inside a layer (T5's sub-layers) keep their literal indices: transformers 5 keeps no
        experts as a ModuleList, and expert tensors are folded from their checkpoint names instead.
        """
        segments = path.split(".") if path else []
        for position, segment in enumerate(segments):
            if segment.isdigit() and self.modules[".".join(segments[:position])].is_module_list:
                return ".".join([*segments[:position], "{layer}", *segments[position + 1 :]]), int(segment)
        return path, None

    def _instances(self) -> list[_Instance]:
        aliases = dict(self.tree.tied)
        instances: list[_Instance] = []
        seen: set[str] = set()
        for path, module in self.modules.items():
            prefix = f"{path}." if path else ""
            own = {prefix + p.name: p for p in module.parameters if prefix + p.name not in aliases}
            shared = [aliases[prefix + p.name] for p in module.parameters if prefix + p.name in aliases]
            state = {**own, **{prefix + b.name: b for b in module.buffers}}
            if not state and not shared:
                if self._is_activation(path, module):  # a parameter-free operator of an MLP: a node of its own
                    self.activations.add(path)
                    template, layer = self._template(path)
                    instances.append(
                        _Instance(
                            path=path,
                            template=template,
                            layer=layer,
                            class_name=module.class_name,
                            own=(),
                            is_container=False,
                            tensors={},
                            shares_with=None,
                        )
                    )
                continue
            dtypes = {name: tensor.dtype for name, tensor in state.items()}
            fallback = next(iter(dtypes.values()), self.b.dtype)
            tensors: dict[str, tuple[tuple[int, ...], str, str]] = {}
            # module.checkpoint: its own tensors of ``state``, as save_pretrained names and shapes them. A name the
            # whole model saves with another shape is not this module's alone (a converter fuses several modules'
            # tensors into one, Kimi-K2.5's vision wqkv): it is left to the whole model's list.
            for name, size in module.checkpoint.items():
                if name in self.saved and self.whole.get(name) == size:
                    tensors[name] = (size, dtypes.get(name, fallback), self.saved[name])
                    seen.add(name)
            if not tensors and not shared:
                continue  # everything it holds is left out of checkpoints
            template, layer = self._template(path)
            instances.append(
                _Instance(
                    path=path,
                    template=template,
                    layer=layer,
                    class_name=module.class_name,
                    own=tuple(p.name for p in module.parameters),
                    is_container=module.children_own_parameters,
                    tensors=tensors,
                    shares_with=shared[0].rsplit(".", 1)[0] if shared else None,
                )
            )
        instances = self._merged_expert_lists(instances)
        missing = [name for name in self.saved if name not in seen]
        if missing:
            self.notes.append(
                f"{len(missing)} checkpoint tensors could not be attributed to the module that holds them and are "
                f"listed on one node ({missing[0]}, …)."
            )
            self.unattributed = missing
        return instances

    def _expert_lists(self) -> dict[str, int]:
        """Routed experts kept one module each, as transformers 4.x's code and a release's own code keep them
        (``mlp.experts`` a ``ModuleList`` of MLPs): a list inside a repeated layer whose items are one class, as many
        as the expert count its owner or a module beside it stores. List path -> expert count."""
        found: dict[str, int] = {}
        for path, module in self.modules.items():
            if not module.is_module_list or self._template(path)[1] is None or len(set(module.children.values())) != 1:
                continue
            owner = path.rsplit(".", 1)[0]
            near = [owner, *(f"{owner}.{name}" for name in self.modules[owner].children)]
            counts = {_first(self.modules[item].routing, EXPERT_COUNT_ATTRIBUTES) for item in near if item != path}
            if len(module.children) > 1 and len(module.children) in counts:
                found[path] = len(module.children)
        return found

    def _merged_expert_lists(self, instances: list[_Instance]) -> list[_Instance]:
        """Each list of experts kept one module each (``_expert_lists``) as one instance at the list's path holding
        every expert's tensors (``experts.{j}.gate_proj.weight``), as transformers 5's fused bank is one module: its
        rows fold per expert (``_fold_experts``) and it is a bank of routed experts (``banks``)."""
        lists = self._expert_lists()
        if not lists:
            return instances
        merged: dict[str, _Instance] = {}
        kept: list[_Instance] = []
        for instance in instances:
            within = next((path for path in lists if instance.path.startswith(f"{path}.")), None)
            if within is None:
                kept.append(instance)
                continue
            if instance.path in self.activations:  # a bank applies its experts' activation inside it
                self.activations.discard(instance.path)
                continue
            if within not in merged:
                template, layer = self._template(within)
                merged[within] = _Instance(
                    path=within,
                    template=template,
                    layer=layer,
                    class_name=next(iter(self.modules[within].children.values())),
                    own=(),
                    is_container=False,
                    tensors={},
                    shares_with=None,
                )
                kept.append(merged[within])
            merged[within].tensors.update(instance.tensors)
        self.banks.update({path: lists[path] for path in merged})
        return kept

    def _ran(self, path: str) -> bool:
        """Whether the traced forward ran the module at ``path``, or its counterpart in the earlier item of the same
        structure that stood for the item holding it (``ShapeTrace.repeats``: that item's modules were not run)."""
        if path in self.trace_order:
            return True
        parts = path.split(".")
        for end in range(1, len(parts)):
            first = self.trace.repeats.get(".".join(parts[:end]))
            if first is not None:
                return ".".join((first, *parts[end:])) in self.trace_order
        return False

    def _is_activation(self, path: str, module: ModuleRecord) -> bool:
        """Whether a module is an activation function an MLP calls between its projections (``act_fn``): a torch
        activation layer or transformers' ``…Activation`` class, holding nothing, that the traced forward ran, in a
        module that is not itself a node (an experts bank applies its own inside its kernel)."""
        if "." not in path or not self._ran(path) or module.children:
            return False
        activation = module.nn_class in ACTIVATION_LAYERS or module.class_name.endswith("Activation")
        parent = self.modules[path.rsplit(".", 1)[0]]
        return activation and not parent.parameters and _role(path.rsplit(".", 2)[-2], parent.class_name) == "MLP"

    def _fold(self, instances: list[_Instance]) -> list[_Folded]:
        """One ``_Folded`` per template and signature (class, checkpoint rows, tie), instances in tree order."""
        folded: dict[tuple[Any, ...], _Folded] = {}
        for instance in instances:
            rows = [
                (_templated(name, instance.layer), size, dtype, role)
                for name, (size, dtype, role) in instance.tensors.items()
            ]
            rows, per_item = _fold_experts(rows)
            shares = self._template(instance.shares_with)[0] if instance.shares_with else None
            key = (instance.template, instance.class_name, tuple(rows), per_item, shares)
            entry = folded.setdefault(key, _Folded(key=key, first=instance, rows=rows, per_item=per_item))
            entry.instances.append(instance)
        return list(folded.values())

    # -- shapes ------------------------------------------------------------------------------------

    def _dim(self, path: str, value: int, *, fused: bool = False) -> Dim:
        """A fixed size of the module at ``path``, named after what structurally sizes it, else by its number.

        The candidates are read off the module and then its owners, nearest first, up to the nearest that holds a
        config (``_size_tiers``); the first tier where any candidate has the value decides: one name names it,
        several leave it a number, as do a size of 1 or less and a fused projection's width (``fused``: the sum of
        its parts, which nothing names).
        """
        if value > 1 and not fused:
            for tier in self._size_tiers(path):
                found = [dim for dim in tier if dim.value == value]
                if len(found) == 1:
                    return found[0]
                if found:
                    break
        return Dim(symbol=str(value), label="dim", value=value)

    def _size_tiers(self, path: str) -> list[list[Dim]]:
        """What sizes the module at ``path``, as tiers of named sizes, nearest first: per module from it up to the
        nearest one holding a config, its integer attributes, then head count × head size of them, then the keys of
        its config its role is sized by (``ATTENTION_CONFIG_KEYS``, ``MODEL_CONFIG_KEYS``; none for an MLP, experts
        or a router, which are built from the sizes they keep as attributes), then head count × head size of those."""
        cached = self._tiers.get(path)
        if cached is not None:
            return cached
        tiers: list[list[Dim]] = []
        segments = path.split(".") if path else []
        for depth in range(len(segments), -1, -1):
            owner = self.modules.get(".".join(segments[:depth]))
            if owner is None:
                continue
            attributes = {name: (value, f"{owner.class_name}.{name}", ()) for name, value in owner.sizes.items()}
            tiers += [_named(attributes), _named(_head_products(attributes, attributes))]
            if owner.config_sizes:
                config = {
                    key: (owner.config_sizes[key], key, (key.rsplit(".", 1)[-1],))
                    for key in _config_keys_of(segments[depth - 1] if depth else "", owner.class_name)
                    if key in owner.config_sizes
                }
                tiers += [_named(config), _named(_head_products(config, {**config, **attributes}))]
                break
        self._tiers[path] = tiers
        return tiers

    def _shape(
        self,
        path: str,
        name: str,
        prefill: tuple[int, ...],
        decode: tuple[int, ...] | None,
        *,
        fused: bool | None = None,
    ) -> Shape:
        """A traced shape as symbols; ``fused`` (by default, whether ``path`` is a fused projection's) leaves the last
        axis a number."""
        fused = _fused(path) if fused is None else fused
        dims: list[Dim] = []
        for axis, size in enumerate(prefill):
            later = decode[axis] if decode is not None and len(decode) == len(prefill) else None
            if size == TRACE_PREFILL and later in (1, None):
                dims.append(POSITIONS)
            elif size == TRACE_PREFILL and later == TRACE_PAST + 1:
                dims.append(KEY_POSITIONS)
            elif size == TRACE_BATCH * TRACE_PREFILL and later in (TRACE_BATCH, None):
                dims.append(TOKENS)
            elif size == TRACE_BATCH and axis == 0 and later in (TRACE_BATCH, None):
                dims.append(BATCH)
            elif later is not None and later != size:
                dims.append(Dim(symbol="?", label="varies with the input"))
            else:
                dims.append(self._dim(path, size, fused=fused and axis == len(prefill) - 1))
        return Shape(name=name, dims=tuple(dims))

    def _outputs(self, path: str) -> tuple[Shape, ...]:
        prefill = self.trace.prefill.get(path)
        if prefill is None:
            return ()
        decode = self.trace.decode.get(path)
        return tuple(
            self._shape(
                path,
                "output" if len(prefill) == 1 else f"output[{i}]",
                size,
                decode[i] if decode is not None and i < len(decode) else None,
            )
            for i, size in enumerate(prefill)
        )

    def _inputs(self, instance: _Instance, outputs: tuple[Shape, ...], rule: str | None) -> tuple[Shape, ...]:
        if not outputs or rule is None or instance.is_container:
            return ()
        out = outputs[0]
        if rule == "same":
            return (Shape(name="input", dims=out.dims),)
        if rule == "lookup":
            return (Shape(name="input_ids", dims=out.dims[:-1]),)
        weight = self._weight_shape(instance)
        if weight is None or not out.dims or rule not in ("linear", "transposed"):
            return ()
        width = weight[1] if rule == "linear" else weight[0]
        return (Shape(name="input", dims=(*out.dims[:-1], self._dim(instance.path, width))),)

    # -- words -------------------------------------------------------------------------------------

    def _class_summary(self, class_name: str) -> ClassSummary | None:
        return next((entry for entry in CLASS_SUMMARIES if class_name.endswith(entry.suffix)), None)

    def _weight_shape(self, instance: _Instance) -> tuple[int, ...] | None:
        """The module's 2-D ``weight`` as the modeling code holds it (also when tied to another module's)."""
        return self.modules[instance.path].weight_shape

    def _summary(self, entry: _Folded, known: ClassSummary | None) -> str:
        instance = entry.first
        names = ", ".join(instance.own or (name.rsplit(".", 1)[-1] for name in instance.tensors))
        attr = instance.path.rsplit(".", 1)[-1] if instance.path else ""
        role = _role(attr, instance.class_name)
        if instance.is_container and role is not None:
            return f"Tensors the {role} module {instance.class_name} holds itself ({names}), used in its forward pass."
        if instance.is_container or known is None:
            return (
                f"Of unknown kind: archviz does not recognise what a {instance.class_name} computes and does not "
                f"guess; it holds {names} itself."
            )
        has_bias = any(template.endswith(".bias") for template, _, _, _ in entry.rows)
        text = known.summary.replace("{bias}", " and add a learned bias" if has_bias else "")
        shape = self._weight_shape(instance)
        if shape is not None:
            text = text.replace("{rows}", f"{shape[0]:,}").replace("{cols}", f"{shape[1]:,}")
        if "{" in text:
            text = f"A {instance.class_name} module with learned parameters."
        return text

    def _settings(self, instance: _Instance) -> list[Setting]:
        module = self.modules[instance.path]
        settings: list[Setting] = []
        eps = module.epsilon
        if eps is not None:
            keys = tuple(key for key in EPSILON_KEYS if self.s.values.get(key) == eps)
            settings.append(Setting(name="epsilon", value=float(eps), config_keys=keys[:1]))
        padding = module.padding_index
        if padding is not None:
            settings.append(Setting(name="padding index", value=str(padding), config_keys=("pad_token_id",)))
        return settings

    # -- ids and groups ----------------------------------------------------------------------------

    def _id(self, template: str, taken: set[str]) -> str:
        text = template.replace(".{layer}", "").replace("{layer}.", "")
        base = _ID_UNSAFE.sub("-", text.lower().replace("_", "-")).strip("-.") or "module"
        if base == "model":
            base = "model-module"
        candidate = first_free(base, taken)
        taken.add(candidate)
        return candidate

    def _group_kind(self, attr: str, class_name: str, is_layer: bool) -> GroupKind:
        # The attribute name first, then the end of the class name: a family's prefix (``Qwen3_5Moe``) says
        # nothing about what one of its modules is.
        lowered, name = attr.lower(), class_name.lower()
        if is_layer:
            return GroupKind.BLOCK
        if any(word in lowered for word in VISION_WORDS):
            return GroupKind.VISION
        if "projector" in lowered:  # what maps image features to the text width (``multi_modal_projector``)
            return GroupKind.PROJECTOR
        if "experts" in name:
            return GroupKind.EXPERTS
        if "attn" in lowered or "attention" in lowered:
            return GroupKind.ATTENTION
        if name.endswith(("moeblock", "moe", "sparseblock")) or "sparsemoe" in name:
            return GroupKind.MOE
        if any(word in lowered for word in ("mlp", "ffn", "feed_forward", "intermediate")) or name.endswith("mlp"):
            return GroupKind.MLP
        if name.endswith("attention"):
            return GroupKind.ATTENTION
        return GroupKind.BLOCK

    # -- the graph ---------------------------------------------------------------------------------

    def build(self, model: ModelInfo) -> Graph:
        b = self.b
        root_class = self.tree.class_name
        b.group(
            "model",
            title=model.architecture or root_class,
            kind=GroupKind.MODEL,
            parent=None,
            summary=f"{root_class} as transformers builds it, read off its module tree.",
        )
        folded = self._fold(self._instances())
        self._find_banks()
        order = self.trace_order
        unvisited = len(order)
        tree = {path: position for position, path in enumerate(self.modules)}

        def position(path: str) -> tuple[int, int, int]:
            """Where a module ran; one the forward never called (``conv1d``, whose weight a function reads) sits
            after its first sibling that ran."""
            if path in order:
                return order[path], 0, tree[path]
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            siblings = (
                [order[f"{parent}.{name}"] for name in self.modules[parent].children if f"{parent}.{name}" in order]
                if path
                else []
            )
            return (min(siblings), 1, tree[path]) if siblings else (unvisited, 0, tree[path])

        folded.sort(key=lambda e: position(e.first.path))
        taken: set[str] = {"model"}
        groups: dict[tuple[str, str], str] = {}
        node_of_path: dict[str, str] = {}
        ids: list[str] = []
        for entry in folded:
            first = entry.first
            # A container's node is named after its own tensors: its path names its group.
            suffix = f".{first.own[0]}" if first.is_container and first.own else ""
            ids.append(self._id(first.template + suffix, taken))
            node_of_path.update({instance.path: ids[-1] for instance in entry.instances})
            self.node_paths[ids[-1]] = first.path
        titles = self._titles(folded, ids)
        mixers = self._recurrent_mixers()
        cores = self._attention_cores()
        latent = self._latent_cores(cores)
        indexers = self._indexers()
        for entry, id in zip(folded, ids, strict=True):
            group = self._parent_group(entry.first, groups, taken)
            # A mixer's parameter-free work runs before its output projection.
            for core in cores.pop(entry.first.template, ()):
                self._core_nodes(core, group, titles[id].rsplit(" · ", 1)[0] if " · " in titles[id] else "", taken)
            shapes = latent.pop(entry.first.template, [])
            for shape in shapes:
                place = titles[id].rsplit(" · ", 1)[0] if " · " in titles[id] else ""
                self._latent_core_nodes(shape, group, place, len(shapes), taken)
            for mixer in mixers.pop(entry.first.template, ()):
                self._mixer_nodes(mixer, group, taken)
            self._node(entry, id, titles[id], group, node_of_path)
            for indexer in indexers.pop(entry.first.template, ()):  # its scores follow its key projection
                self._indexer_nodes(indexer, group, taken)
        if self.unattributed:
            b.node(
                "unattributed",
                title="Unattributed checkpoint tensors",
                kind=NodeKind.LEARNED,
                code="model.state_dict()",
                summary="Checkpoint tensors the module walk could not place on the module that holds them.",
                group="model",
                parameters=[
                    b.tensor(name, name, [factor(str(n), n) for n in self.tree.parameters.get(name, ())])
                    for name in self.unattributed
                    if name in self.tree.parameters
                ],
                buffers=[
                    b.tensor(name, name, [factor(str(n), n) for n in self.tree.persistent_buffers[name]])
                    for name in self.unattributed
                    if name in self.tree.persistent_buffers
                ],
            )
        containers = {i.path for entry in folded if entry.first.is_container for i in entry.instances}
        flow = self._flow(node_of_path, containers)
        self._trace_notes()
        self._unreached_note(flow, ids)
        embedding = self._input_embedding(node_of_path)
        graph = b.finish(
            model,
            input_embedding=embedding,
            layers=self._layers(folded),
            notes=tuple(self.notes),
            derived_from_code=True,
            layer_keys=LAYER_KEYS,
        )
        return replace(
            graph,
            active_unknown=self._active_unknown(),
            trace_failures=self._trace_failures(),
            unpriced=self._unpriced(graph),
            naming=NamingMap(renames=self._module_renames(folded)),
            flow=self._through_cores(flow, graph),
        )

    def _through_cores(self, flow: tuple[DataEdge, ...], graph: Graph) -> tuple[DataEdge, ...]:
        """The traced flow passed through each parameter-free core added beside the modules (``self.cores``).

        The trace sees modules only, so a tensor that goes through attention's or a recurrent mixer's own work
        reaches the next module directly (``q_proj -> o_proj``). Inside the core's group such an edge is rerouted:
        attention's keys and values (the projections and norms named ``k``/``v``) go into the KV cache, which feeds
        the core, everything else into the core, which feeds the output projection. In a recurrent mixer the
        convolution's weight (``conv1d``) and what it received go through the convolution node, and what reached the
        post-core modules from the convolution, or from a tensor held by the mixer itself (``dt_bias``, ``A_log``),
        comes from the core; a projection that also feeds the post-core modules directly keeps that edge (the
        output gate, ``z``)."""
        nodes = {node.id: node for node in graph.nodes}
        # Vectors and scalars a module holds and multiplies in element-wise, a norm's scale aside.
        holders = frozenset(
            id
            for id, path in self.node_paths.items()
            if nodes[id].parameters
            and all(len(row.shape) < 2 for row in nodes[id].parameters)
            and not _counts_nothing(self.modules[path])
        )
        edges = list(flow)
        for site in self.cores:
            edges = _rerouted(edges, site, nodes, holders)
        return tuple(dict.fromkeys(edges))

    def _module_renames(self, folded: list[_Folded]) -> tuple[Rename, ...]:
        """Each checkpoint module name that is not the path of the module holding its tensors, with that path
        (``Graph.naming``), instance by instance and longest first: a release's names are its conversion
        mapping's (MiniMax-M3's ``language_model.model.layers.2.self_attn.index_q_proj`` is the module
        ``model.language_model.layers.2.self_attn.indexer.q_proj``), which the FLOP count looks modules up by. A
        bank of experts is named up to its expert index."""
        renames: dict[str, str] = {}
        for entry in folded:
            for instance in entry.instances:
                for name in instance.tensors:
                    segments = name.split(".")[:-1]
                    if instance.path in self.banks:  # ``….experts.{expert}.w1.weight``: the bank is ``….experts``
                        numbers = [i for i, segment in enumerate(segments) if segment.isdigit()]
                        segments = segments[: numbers[1]] if len(numbers) > 1 else segments
                    module = ".".join(segments)
                    if module != instance.path:
                        renames.setdefault(module, instance.path)
        return tuple(
            Rename(checkpoint=old, module=new, anchored=True, source="the modules transformers built")
            for old, new in sorted(renames.items(), key=lambda pair: (-len(pair[0]), pair[0]))
        )

    # -- the data flow -----------------------------------------------------------------------------

    def _flow(self, node_of_path: Mapping[str, str], containers: set[str]) -> tuple[DataEdge, ...]:
        """The traced prefill pass's data flow between nodes (``ShapeTrace.calls``), each repeated block once.

        A call is a node's when it is the forward of a module that is a node (not a container: its node stands for
        its own tensors alone) or a use of a node's module's parameters; every other call (a decoder layer, an
        attention module, a rotary embedding) is seen through to what it returned. An edge between two layers of
        the same list is the block's output becoming its next input: the block's entry (from before the list) and
        exit (to after it) already draw it, so it is left out, as is a node feeding itself.
        """
        calls = self.trace.calls

        def node(index: int) -> str | None:
            call = calls[index]
            if call.kind is CallKind.INPUT:
                return call.path
            if call.kind is CallKind.MODULE and call.path in containers:
                return None
            return node_of_path.get(call.path)

        seen: dict[tuple[int, int], dict[int, bool]] = {}

        def origins(index: int, output: int) -> dict[int, bool]:
            """The node calls (-> residual) one tensor a call returned comes from: the call itself if it is a node's."""
            if node(index) is not None:
                return {index: False}
            if (index, output) not in seen:
                found: dict[int, bool] = {}
                call = calls[index]
                entered = {(read.source, read.output) for read in call.reads}
                for read in call.returns[output] if output < len(call.returns) else ():
                    if read.residual and (read.source, read.output) in entered:
                        continue  # the block's input added back to its stream: drawn as the block's entry
                    for source, residual in origins(read.source, read.output).items():
                        found[source] = found.get(source, True) and (residual or read.residual)
                seen[index, output] = found
            return seen[index, output]

        edges: dict[tuple[str, str, bool], DataEdge] = {}
        for index, call in enumerate(calls):
            target = node(index)
            if target is None or call.kind is CallKind.INPUT:
                continue
            for read in call.reads:
                for source_index, through in origins(read.source, read.output).items():
                    source, residual = node(source_index), through or read.residual
                    if source is None or source == target or self._across_layers(calls[source_index].path, call.path):
                        continue
                    from_input = calls[source_index].kind is CallKind.INPUT
                    key = (source if not from_input else f"input {source}", target, residual)
                    if key not in edges:
                        # Named as its producer's sizes name it; the width a fused projection makes (q, k and v at
                        # once) is named by nothing, as on its node.
                        named_by = call.path if from_input else calls[source_index].path
                        shape = self._shape(named_by, "input", read.shape, None)
                        edges[key] = DataEdge(
                            source=source, target=target, shape=shape, residual=residual, from_input=from_input
                        )
        return tuple(edges.values())

    def _across_layers(self, source: str, target: str) -> bool:
        """Whether two module paths are in different items of the same repeated list (layer i and layer j)."""
        (source_template, source_layer), (target_template, target_layer) = (
            self._template(source),
            self._template(target),
        )
        if source_layer is None or target_layer is None or source_layer == target_layer:
            return False
        return source_template.split("{layer}")[0] == target_template.split("{layer}")[0]

    def _unreached_note(self, flow: tuple[DataEdge, ...], ids: list[str]) -> None:
        """Say which modules' nodes no traced tensor reaches: the diagram draws them unconnected."""
        connected = {edge.target for edge in flow} | {edge.source for edge in flow if not edge.from_input}
        unreached = [id for id in ids if id not in connected]
        if unreached and self.trace.calls:
            self.notes.append(
                f"{len(unreached)} nodes are reached by no tensor of another node or of the model's inputs in the "
                "traced prefill pass (it did not run their modules, they read only tensors the model makes itself, "
                f"or it used their tensors on no data: {unreached[0]}, …) and are drawn unconnected."
            )
        elif not self.trace.calls:
            self.notes.append(
                "The data flow is not known (the traced prefill pass did not run): nodes are unconnected."
            )

    def _trace_failures(self) -> tuple[str, ...]:
        """Each traced pass that raised, naming the innermost module that was running and the error."""
        return tuple(
            f"the {note.phase} pass raised in {note.module or 'the whole model'}: {note.message}"
            + (" (a bug in archviz)" if note.internal else "")
            for note in self.trace.errors
        )

    def _titles(self, folded: list[_Folded], ids: list[str]) -> dict[str, str]:
        """Each node's title (``_title``), unique in the graph: where two read the same, the layers they are in are
        numbered, and where that does not tell them apart, their ids are added."""
        titles = {id: self._title(entry) for entry, id in zip(folded, ids, strict=True)}
        first = Counter(titles.values())
        for entry, id in zip(folded, ids, strict=True):
            layers = [i.layer for i in entry.instances if i.layer is not None]
            if layers and first[titles[id]] > 1:
                titles[id] = self._title(entry, layers=_layer_ranges(layers))
        counts = Counter(titles.values())
        for id, title in titles.items():
            if counts[title] > 1:
                words, _, class_name = title.rpartition(" (")
                titles[id] = f"{words} [{id}] ({class_name}"
        return titles

    def _title(self, entry: _Folded, *, layers: str | None = None) -> str:
        """A node's title by its place and role, then its class (``language model · layer · attention · k_proj
        (Linear)``): each module on its path read as a tower, the layer, its role or its attribute spelled out
        (``_place_word``; the base model a task model wraps and the lists left out), then the node's own attribute,
        or for a module holding tensors beside its children the names of those; ``layers`` numbers the layer."""
        instance = entry.first
        template = instance.template.split(".") if instance.template else []
        path = instance.path.split(".") if instance.path else []
        own = instance.own or tuple(name.rsplit(".", 1)[-1] for name in instance.tensors)
        leaf = ", ".join(own) if instance.is_container else (path[-1] if path else "")
        above = path if instance.is_container else path[:-1]
        words: list[str] = []
        for depth, segment in enumerate(above, start=1):
            module = self.modules[".".join(path[:depth])]
            if ".".join(path[:depth]) == self.tree.base_model or module.is_module_list:
                continue
            if template[depth - 1] == "{layer}":
                word = "layer" if layers is None else f"layer{'s' if ',' in layers or '–' in layers else ''} {layers}"
            else:
                word = segment if segment.isdigit() else _place_word(segment, module.class_name)
            if not words or words[-1] != word:
                words.append(word)
        return f"{' · '.join([*words, leaf or instance.class_name])} ({instance.class_name})"

    def _parent_group(self, instance: _Instance, groups: dict[tuple[str, str], str], taken: set[str]) -> str:
        """The innermost group around a module's node, opening the groups on its path as needed.

        A container that owns parameters (an attention module's ``sinks``) sits in its own group.
        """
        segments = instance.path.split(".") if instance.path else []
        if not instance.is_container:
            segments = segments[:-1]
        parent = "model"
        for depth in range(1, len(segments) + 1):
            path = ".".join(segments[:depth])
            module = self.modules[path]
            # The ModuleList itself and the base model a task model wraps (``model``, ``bert``) are transparent.
            if module.is_module_list or path == self.tree.base_model:
                continue
            template, layer = self._template(path)
            class_name = module.class_name
            key = (template, class_name)
            if key not in groups:
                is_layer = template.endswith("{layer}")
                placement = self._group_placement(template, class_name) if layer is not None else MODEL_LEVEL
                groups[key] = self.b.group(
                    self._id(template, taken),
                    title=class_name,
                    kind=self._group_kind(segments[depth - 1], class_name, is_layer),
                    parent=parent,
                    placement=placement,
                    summary=(
                        f"One {class_name} layer, the same modules in each of its {len(placement.layers)} layers."
                        if is_layer
                        else f"The {class_name} module ({template}) and the modules it contains."
                    ),
                )
            parent = groups[key]
        return parent

    def _group_placement(self, template: str, class_name: str) -> Placement:
        layers = sorted(
            {
                layer
                for path, module in self.modules.items()
                if module.class_name == class_name
                for t, layer in [self._template(path)]
                if t == template and layer is not None
            }
        )
        return layer_placement(layers)

    def _node(self, entry: _Folded, id: str, title: str, group: str, node_of_path: Mapping[str, str]) -> None:
        b, instance = self.b, entry.first
        layers = [i.layer for i in entry.instances if i.layer is not None]
        placement = self._placement(entry, sorted(layers))
        known = self._class_summary(instance.class_name)
        # A container's outputs are its whole computation's, not its own tensors': leave them unknown.
        outputs = () if instance.is_container else self._outputs(instance.path)
        inputs = self._inputs(instance, outputs, known.input_rule if known else None)
        op = self._op(entry)
        weight = self._weight_shape(instance)
        if op is not None and op.kind is OpKind.LINEAR and not inputs and outputs and weight is not None:
            # A router multiplies the tokens it flattened by its weight: its input is its output's tokens, in width.
            inputs = (Shape(name="input", dims=(*outputs[0].dims[:-1], self._dim(instance.path, weight[1]))),)
        if not inputs:
            self.unknown_inputs.append(id)
        if op is not None and op.kind is OpKind.LINEAR and not inputs:
            self.unpriced_modules.append(f"{instance.class_name} at {instance.template} (the trace gave it no input)")
            op = None
        parameters: list[TensorRow] = []
        buffers: list[TensorRow] = []
        for template, size, dtype, role in entry.rows:
            fused = _fused(instance.path)
            factors = [
                factor(_factor_name(self._dim(instance.path, n, fused=fused and axis == 0)), n)
                for axis, n in enumerate(size)
            ]
            component = template.rsplit(".", 1)[-1] if "." in template else template
            owner = template.rsplit(".", 2)[-2] if template.count(".") >= 1 else ""
            row = b.tensor(f"{owner} {component}".strip(), template, factors, dtype=dtype)
            # The class holding it, which quantizers convert by (``archviz.families.fp8``, ``fbgemm``, ``gptq``)
            row = replace(row, module=instance.class_name)
            (parameters if role == "parameter" else buffers).append(row)
        attr = instance.path.rsplit(".", 1)[-1] if instance.path else ""
        if instance.is_container:
            code = ", ".join(f"self.{name}" for name in instance.own)
        else:
            code = f"self.{attr}" if not attr.isdigit() else f"self[{attr}]"
        shares = node_of_path.get(instance.shares_with) if instance.shares_with else None
        summary = self._summary(entry, known)
        if shares is not None:
            summary = summary[:-1] + f"; its tied weight is {shares}'s, counted there."
        activation = instance.path in self.activations
        if activation:  # computes, holds nothing
            summary = f"Apply the {instance.class_name} activation to each element (no FLOPs counted)."
        b.node(
            id,
            title=title,
            kind=NodeKind.OPERATOR if activation else NodeKind.LEARNED,
            code=code,
            summary=summary,
            group=group,
            inputs=inputs,
            outputs=outputs,
            parameters=parameters,
            buffers=buffers,
            placement=placement,
            settings=self._settings(instance),
            shares_parameters_with=shares,
            op=op,
        )

    # -- what nodes compute --------------------------------------------------------------------------

    def _op(self, entry: _Folded) -> Op | None:
        """What a module's node computes, for the cost model, read off the built module: a bank of routed experts,
        a torch ``Linear`` (a head tied to the embedding included), or a router (a module storing a top-k that holds
        a 2-D weight it multiplies the tokens by). None for anything else (lookups and norms count no FLOPs; other
        modules are priced by their own kind or listed in ``unpriced``)."""
        path = entry.first.path
        module = self.modules[path]
        if _in_encoder(path):  # runs on images: priced with them, not per text token
            return None
        if path in self.banks:
            return Op(kind=OpKind.EXPERTS, top_k="top_k")
        if module.weight_shape is None:
            return None
        if module.nn_class == "Linear":
            return Op(kind=OpKind.LINEAR)
        if module.nn_class is None and _first(module.routing, TOP_K_ATTRIBUTES) is not None:
            return Op(kind=OpKind.LINEAR)
        return None

    # -- recurrent mixers ----------------------------------------------------------------------------

    def _recurrent_mixers(self) -> dict[str, list[_Mixer]]:
        """Every gated delta net, Mamba2 mixer and lightning attention of the text model, by the template of its output
        projection: one ``_Mixer`` per distinct set of sizes, with the layers that have it. Their sizes are the built
        module's attributes, named by the config keys transformers reads them from."""
        found: dict[tuple[str, str, str, tuple[tuple[str, Size], ...]], list[int]] = {}
        for path, module in self.modules.items():
            kind = next((kind for kind, ends in MIXER_CLASSES.items() if module.class_name.endswith(ends)), None)
            if kind is None or _in_encoder(path):
                continue
            template = self._template(path)[0]
            sizes = _mixer_sizes(kind, module)
            output = f"{path}.out_proj"
            if sizes is None or output not in self.modules:
                self.unpriced_modules.append(f"{module.class_name} at {template} (its sizes are not attributes)")
                continue
            self.typed_mixers.add((template, module.class_name))
            # Its work runs after its input projections and before whatever of it the forward calls next (a gated
            # norm, else the output projection): its nodes go before that module's.
            if kind != "lightning":
                output = f"{path}.{self._next_call(template, module)}"
            out_template, layer = self._template(output)
            found.setdefault((out_template, template, kind, sizes), []).append(-1 if layer is None else layer)
        mixers: dict[str, list[_Mixer]] = {}
        for (output, template, kind, sizes), layers in found.items():
            mixers.setdefault(output, []).append(
                _Mixer(template=template, kind=kind, sizes=dict(sizes), layers=[i for i in layers if i >= 0])
            )
        return mixers

    def _next_call(self, template: str, module: ModuleRecord) -> str:
        """The child of a recurrent mixer the forward calls first after its input projections (a gated norm, else
        the output projection), read off the instances of its template that the trace ran."""
        names = [name for name in module.children if not name.startswith(("in_proj", "conv"))]
        for path, other in self.modules.items():
            if self._template(path)[0] != template or other.class_name != module.class_name:
                continue
            traced = [name for name in names if f"{path}.{name}" in self.trace_order]
            if traced:
                return min(traced, key=lambda name: self.trace_order[f"{path}.{name}"])
        return "out_proj"

    def _mixer_nodes(self, mixer: _Mixer, group: str, taken: set[str]) -> None:
        layers = sorted(mixer.layers)
        placement = layer_placement(layers) if layers else MODEL_LEVEL
        prefix = f"{group}."  # the mixer's own group: its nodes are named inside it
        z = mixer.sizes
        if mixer.kind == "lightning":
            lightning = lightning_nodes(
                self.b,
                prefix,
                group=group,
                placement=placement,
                heads=z["heads"],
                head_dim=z["head_dim"],
                block_size=z["block_size"],
            )
            taken.update((lightning.core, lightning.state))
            return
        if mixer.kind == "gated delta net":
            added = gated_delta_nodes(
                self.b,
                prefix,
                group=group,
                placement=placement,
                key_heads=z["key_heads"],
                value_heads=z["value_heads"],
                key_head_dim=z["key_head_dim"],
                value_head_dim=z["value_head_dim"],
                conv_kernel=z["conv_kernel"],
            )
        else:
            added = mamba2_nodes(
                self.b,
                prefix,
                group=group,
                placement=placement,
                heads=z["heads"],
                head_dim=z["head_dim"],
                groups=z["groups"],
                state_size=z["state_size"],
                conv_kernel=z["conv_kernel"],
                chunk=z["chunk"],
            )
        taken.update((added.convolution, added.conv_state, added.core, added.state))
        self.cores.append(
            _Site(group=group, core=added.core, states=(added.conv_state, added.state), convolution=added.convolution)
        )

    # -- sparse attention's indexer --------------------------------------------------------------------

    def _indexers(self) -> dict[str, list[_Mixer]]:
        """Every lightning indexer of the text model, by the template of its key projection: one ``_Mixer`` per
        distinct set of sizes, with the layers that have it, its sizes the built module's attributes."""
        found: dict[tuple[str, str, tuple[tuple[str, Size], ...]], list[int]] = {}
        for path, module in self.modules.items():
            if not module.class_name.endswith(LIGHTNING_INDEXER) or _in_encoder(path):
                continue
            template = self._template(path)[0]
            sizes = _sizes(INDEXER_SIZES, module)
            key = f"{path}.k_proj"
            if sizes is None or key not in self.modules:
                self.unpriced_modules.append(f"{module.class_name} at {template} (its sizes are not attributes)")
                continue
            key_template, layer = self._template(key)
            found.setdefault((key_template, template, sizes), []).append(-1 if layer is None else layer)
        indexers: dict[str, list[_Mixer]] = {}
        for (key, template, sizes), layers in found.items():
            indexers.setdefault(key, []).append(
                _Mixer(template=template, kind="indexer", sizes=dict(sizes), layers=[i for i in layers if i >= 0])
            )
        return indexers

    def _indexer_nodes(self, indexer: _Mixer, group: str, taken: set[str]) -> None:
        """The indexer's cached index keys and its scores, in the indexer's group."""
        layers = sorted(indexer.layers)
        z = indexer.sizes
        added = indexer_nodes(
            self.b,
            f"{group}.",
            group=group,
            placement=layer_placement(layers) if layers else MODEL_LEVEL,
            heads=z["heads"],
            head_dim=z["head_dim"],
            block_size=z["block_size"],
            topk_blocks=z["topk_blocks"],
            local_blocks=z["local_blocks"],
        )
        taken.update((added.cache, added.scores))

    # -- attention's core and its cache ---------------------------------------------------------------

    def _attention_cores(self) -> dict[str, list[_Core]]:
        """Every softmax-attention module of the text model, by the template of its output projection: one
        ``_Core`` per distinct shape of its heads and window, with the layers that have it."""
        found: dict[tuple[str, str, str, tuple[Dim, Dim, Dim, Dim], bool], dict[int, int | None]] = {}
        for path, module in self.modules.items():
            output = self._output_projection(path, module)
            if output is None or _in_encoder(path):
                continue
            heads = self._heads(path, module)
            if heads is None:
                self.unpriced_modules.append(f"{module.class_name} at {path} (its head counts are not attributes)")
                continue
            template, layer = self._template(output)
            shared = self._reads_shared_keys(path, module)
            at = found.setdefault((template, self._template(path)[0], module.class_name, heads, shared), {})
            at[-1 if layer is None else layer] = module.sliding_window
        cores: dict[str, list[_Core]] = {}
        for (output, template, class_name, heads, shared), windows in found.items():
            # One core per shape of heads: its windowed layers share one window, else one core per window.
            sizes = sorted({window for window in windows.values() if window is not None})
            if len(sizes) <= 1:
                splits = [sorted(windows)]
            else:  # layers without a window join the first window's core
                splits = [
                    sorted(
                        i for i, window in windows.items() if window == size or (window is None and size == sizes[0])
                    )
                    for size in sizes
                ]
            for layers in splits:
                window = next((windows[i] for i in layers if windows[i] is not None), None)
                cores.setdefault(output, []).append(
                    _Core(
                        template=template,
                        class_name=class_name,
                        heads=heads,
                        window=window,
                        windowed=[i for i in layers if i >= 0 and windows[i] is not None],
                        layers=[i for i in layers if i >= 0],
                        reads_shared_keys=shared,
                    )
                )
        for variants in cores.values():
            for core in variants:
                core.variants = len(variants)
        return cores

    def _latent_cores(self, cores: Mapping[str, list[_Core]]) -> dict[str, list[LatentCore]]:
        """The latent attention modules (``archviz.families.latent_attention``), whose heads no ``head_dim`` sizes, by
        the template of their output projection: one core per shape of heads and of cache, with the layers that have
        it. An output projection ``_attention_cores`` found a core for (``cores``) is left to it."""
        found: dict[tuple[str, str, str, LatentHeads, bool], list[int]] = {}
        nn_classes = {path: module.nn_class for path, module in self.modules.items()}
        for path, module in self.modules.items():
            if _in_encoder(path) or _role(path.rsplit(".", 1)[-1], module.class_name) != "attention":
                continue
            heads = latent_heads(path, module, nn_classes)
            if heads is None:
                continue
            output, layer = self._template(heads.output)
            if output in cores:
                continue
            template, _ = self._template(path)
            representative = self.trace.repeats.get(path.rsplit(".", 1)[0], path.rsplit(".", 1)[0])
            latent = caches_latent(f"{representative}.{path.rsplit('.', 1)[-1]}", self.trace)
            heads = replace(heads, output=output)
            found.setdefault((output, template, module.class_name, heads, latent), []).extend(
                [] if layer is None else [layer]
            )
        latent_cores: dict[str, list[LatentCore]] = {}
        for (output, template, class_name, heads, latent), layers in found.items():
            latent_cores.setdefault(output, []).append(
                LatentCore(
                    template=template,
                    class_name=class_name,
                    heads=heads,
                    caches_latent=latent,
                    layers=tuple(sorted(layers)),
                )
            )
        return latent_cores

    def _latent_core_nodes(self, core: LatentCore, group: str, place: str, variants: int, taken: set[str]) -> None:
        """A latent attention module's cache and attention core (``latent_attention.latent_core_nodes``)."""
        which = f" (layers {_layer_ranges(list(core.layers))})" if variants > 1 and core.layers else ""
        cache_id = self._id(f"{core.template}.kv-cache", taken)
        core_id = self._id(f"{core.template}.attention-core", taken)
        prefix = f"{place} · " if place else ""
        latent_core_nodes(self.b, core, ids=(cache_id, core_id), group=group, prefix=prefix, which=which)
        self.cores.append(_Site(group=group, core=core_id, states=(cache_id,)))

    def _output_projection(self, path: str, module: ModuleRecord) -> str | None:
        """The path of an attention module's output projection: it is softmax attention when its role is attention
        and it holds a query (or fused query-key-value) ``Linear`` and an output ``Linear``."""
        if _role(path.rsplit(".", 1)[-1], module.class_name) != "attention" or module.is_module_list:
            return None
        if (self._template(path)[0], module.class_name) in self.typed_mixers:
            return None
        if any(word in module.class_name.lower() for word in LINEAR_ATTENTION_WORDS):
            template = self._template(path)[0]
            self.unpriced_modules.append(f"{module.class_name} at {template} (attention without a softmax core)")
            return None
        linears = {
            name for name in module.children if self.modules[f"{path}.{name}" if path else name].nn_class == "Linear"
        }
        if not linears & QUERY_NAMES:
            return None
        output = sorted(linears & OUTPUT_NAMES)
        return f"{path}.{output[0]}" if len(output) == 1 else None

    def _heads(self, path: str, module: ModuleRecord) -> tuple[Dim, Dim, Dim, Dim] | None:
        """Query heads, key/value heads, query/key width and value width of an attention module, each named by the
        attribute or config key that holds it (the module's own first)."""
        own = {name: (value, f"{module.class_name}.{name}", ()) for name, value in module.sizes.items()}
        config = {
            name: (value, name, (name,)) for name, value in module.config_sizes.items() if not name.startswith("text_")
        }

        def size(*names: str) -> Dim | None:
            for source in (own, config):
                for name in names:
                    if name in source:
                        value, formula, keys = source[name]
                        return Dim(symbol=name, label=name, value=value, formula=formula, config_keys=keys)
            return None

        heads = size("num_heads", "num_attention_heads")
        if heads is None or not heads.value:
            return None
        kv_heads = size("num_key_value_heads", "num_kv_heads") or heads
        width = size("head_dim")
        if width is None:
            hidden = size("hidden_size")
            if hidden is None or not hidden.value:
                return None
            value = hidden.value // heads.value
            width = Dim(symbol="head_dim", label="head_dim", value=value, formula=f"{hidden.formula} / {heads.formula}")
        value_width = size("v_head_dim") or width
        return self._projected_heads(path, module, (heads, kv_heads, width, value_width))

    def _projected_heads(
        self, path: str, module: ModuleRecord, named: tuple[Dim, Dim, Dim, Dim]
    ) -> tuple[Dim, Dim, Dim, Dim]:
        """The head counts and widths as the layer's own projections have them, where those differ from the counts
        its attributes or config name: a layer's key/value heads (Gemma-4's global layers,
        MiMo-V2-Flash's sliding ones) are the rows of its key projection over its head width, never a top-level
        key alone. The named dims stand where the projections agree with them (or are fused or absent). Query heads
        stay as named: a query projection may hold a gate beside the queries (Qwen3.5's gated attention)."""
        heads, kv_heads, width, value_width = named
        rows = {name: self._rows(path, module, names) for name, names in PROJECTION_NAMES.items()}
        if not width.value:
            return named

        def counted(dim: Dim, projection: str, per: Dim, label: str) -> Dim:
            out = rows[projection]
            if out is None or not per.value or out % per.value or out // per.value == dim.value:
                return dim
            name = self._projection_name(path, module, PROJECTION_NAMES[projection])
            return Dim(symbol=label, label=label, value=out // per.value, formula=f"{name} rows / {per.formula}")

        kv_heads = counted(kv_heads, "key", width, "key/value heads")
        value_width = counted(value_width, "value", kv_heads, "value width")
        return heads, kv_heads, width, value_width

    def _rows(self, path: str, module: ModuleRecord, names: frozenset[str]) -> int | None:
        """The output features of the module's ``Linear`` child of one of ``names`` (None if it has none)."""
        for name in module.children:
            child = self.modules.get(f"{path}.{name}" if path else name)
            if name in names and child is not None and child.nn_class == "Linear" and child.weight_shape:
                return child.weight_shape[0]
        return None

    def _projection_name(self, path: str, module: ModuleRecord, names: frozenset[str]) -> str:
        return next(f"{module.class_name}.{name}" for name in module.children if name in names)

    def _reads_shared_keys(self, path: str, module: ModuleRecord) -> bool:
        """Whether the layer computes no keys of its own and reads another layer's: its only projections are the
        query and the output (Gemma-4's KV-shared layers). It keeps no cache."""
        children = {name: self.modules.get(f"{path}.{name}" if path else name) for name in module.children}
        linears = {name for name, child in children.items() if child is not None and child.nn_class == "Linear"}
        return bool(linears) and linears <= (QUERY_NAMES - FUSED_QKV_NAMES) | OUTPUT_NAMES

    def _core_nodes(self, core: _Core, group: str, place: str, taken: set[str]) -> None:
        """The attention core (scores, softmax, values) and the KV cache it reads, in the attention's group."""
        heads, kv_heads, width, value_width = core.heads
        layers = sorted(core.layers)
        placement = layer_placement(layers) if layers else MODEL_LEVEL
        which = f" (layers {_layer_ranges(layers)})" if core.variants > 1 and layers else ""
        windowed = tuple(core.windowed) if core.window else ()
        query = Shape(name="query_states", dims=(BATCH, heads, POSITIONS, width))
        key = Shape(name="key_states", dims=(BATCH, kv_heads, POSITIONS, width))
        value = Shape(name="value_states", dims=(BATCH, kv_heads, POSITIONS, value_width))
        cached_key = Shape(name="key_states", dims=(BATCH, kv_heads, KEY_POSITIONS, width))
        cached_value = Shape(name="value_states", dims=(BATCH, kv_heads, KEY_POSITIONS, value_width))
        window = (
            f", at most {core.window - 1:,} past positions in the layers with a sliding window"
            + (f" (layers {_layer_ranges(core.windowed)})" if core.windowed != layers else "")
            if core.window
            else ""
        )
        prefix = f"{place} · " if place else ""
        states: tuple[str, ...] = ()
        if not core.reads_shared_keys:  # a layer that reads another's keys keeps none
            cache_id = self.b.node(
                self._id(f"{core.template}.kv-cache", taken),
                title=f"{prefix}KV cache{which}",
                kind=NodeKind.OPERATOR,
                code="cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)",
                locate=Locator(
                    claim=f"{core.class_name} appends each step's keys and values to the layer's cache in its forward "
                    "pass.",
                    category=Category.ATTENTION,
                    sites=(statement((core.class_name,), ".update(key_states, value_states"),),
                ),
                summary=f"Append this step's keys and values to the layer's cache and return every cached position"
                f"{window}.",
                group=group,
                inputs=[key, value],
                outputs=[cached_key, cached_value],
                placement=placement,
                op=Op(kind=OpKind.CACHE, window=core.window, windowed_layers=windowed),
            )
            states = (cache_id,)
        core_id = self.b.node(
            self._id(f"{core.template}.attention-core", taken),
            title=f"{prefix}attention core{which}",
            kind=NodeKind.OPERATOR,
            code="attention_interface(self, query_states, key_states, value_states, attention_mask, …)",
            locate=Locator(
                claim=f"{core.class_name} scores queries against the cached keys, takes the softmax and mixes the "
                "values through the attention interface the config selects (eager_attention_forward in this file).",
                category=Category.ATTENTION,
                sites=(statement((core.class_name,), "attention_interface("), function("eager_attention_forward")),
            ),
            summary=(
                "Score each query head against the cached keys of its key/value head"
                + (
                    " (keys and values an earlier layer computed and cached: this layer keeps none)"
                    if core.reads_shared_keys
                    else ""
                )
                + (" within the sliding window" if core.window else "")
                + ", softmax, and mix the values, heads joined."
            ),
            group=group,
            inputs=[query, cached_key, cached_value],
            outputs=[Shape(name="attn_output", dims=(BATCH, POSITIONS, heads, value_width))],
            placement=placement,
            op=Op(kind=OpKind.ATTENTION, window=core.window, windowed_layers=windowed),
        )
        self.cores.append(_Site(group=group, core=core_id, states=states))

    def _unpriced(self, graph: Graph) -> tuple[str, ...]:
        """What the cost model cannot price: every text module that holds a matrix or a kernel of no kind typed here
        (a convolution, whether the forward calls it or uses its weight), and attention without a softmax core."""
        typed = {node.id for node in graph.nodes if node.op is not None}
        if self.trace.decode_skipped:
            return (f"the model has no decode step to price ({self.trace.decode_skipped})",)
        if not any(node.op is not None for node in graph.nodes):
            return ("no module of the model is of a kind the cost model prices",)
        untyped = list(dict.fromkeys(self.unpriced_modules))
        for node in graph.nodes:
            path = self.node_paths.get(node.id)
            if path is None or node.id in typed or _in_encoder(path):
                continue
            owner = path.rsplit(".", 1)[0]
            if any((self._template(at)[0], self.modules[at].class_name) in self.typed_mixers for at in (path, owner)):
                continue  # a typed mixer's convolution weight or decay tables: its nodes price them
            module = self.modules[path]
            # Vectors and scalars a module holds itself (biases, scales, sinks, decay rates) are multiplied
            # element-wise, which counts no FLOPs; a matrix or a kernel of no typed kind is what cannot be priced.
            if _counts_nothing(module) or all(len(row.shape) < 2 for row in (*node.parameters, *node.buffers)):
                continue
            untyped.append(f"{module.class_name} at {self._template(path)[0]}")
        if not untyped:
            return ()
        return (
            f"{len(untyped)} module{'s' if len(untyped) > 1 else ''} of the text model compute"
            f"{'' if len(untyped) > 1 else 's'} what the cost model has no formula for ({', '.join(untyped[:3])}"
            + (", …" if len(untyped) > 3 else "")
            + "), so FLOPs, cache and state are not given",
        )

    # -- routed experts ------------------------------------------------------------------------------

    def _find_banks(self) -> None:
        """Every bank of routed experts: a module that stores an expert count (``num_experts``) and no top-k, and holds
        tensors of its own (transformers' ``…Experts``, ``[E, …]`` each)."""
        for path, module in self.modules.items():
            experts = _first(module.routing, EXPERT_COUNT_ATTRIBUTES)
            if experts is not None and _first(module.routing, TOP_K_ATTRIBUTES) is None and module.parameters:
                self.banks[path] = experts

    def _top_k(self, path: str, experts: int) -> int | None:
        """The experts a token is routed to in the bank at ``path``, read off the nearest module that stores a top-k
        for that many experts: the bank's parent or its other children (a router's ``top_k``), then the grandparent's,
        and so on up. None, saying why in ``routing_unknown``, when no module or several disagreeing ones do."""
        segments = path.split(".")
        for depth in range(len(segments) - 1, -1, -1):
            parent = ".".join(segments[:depth])
            prefix = f"{parent}." if parent else ""
            near = [parent, *(prefix + name for name in self.modules[parent].children)]
            found = {
                top_k
                for candidate in near
                if candidate != path
                for routing in [self.modules[candidate].routing]
                if (top_k := _first(routing, TOP_K_ATTRIBUTES)) is not None
                and _first(routing, EXPERT_COUNT_ATTRIBUTES) in (None, experts)
            }
            if len(found) > 1:
                self.routing_unknown.append(f"the modules around {path} store different top-k ({sorted(found)})")
                return None
            if found:
                top_k = found.pop()
                if not 0 < top_k <= experts:
                    self.routing_unknown.append(f"{path} routes each token to {top_k} of its {experts} experts")
                    return None
                return top_k
        self.routing_unknown.append(f"no module around {path} stores how many of its {experts} experts a token uses")
        return None

    def _placement(self, entry: _Folded, layers: list[int]) -> Placement:
        """Where a node's instances are and how many a token runs through: all, but of a bank of routed experts top-k
        of them (one per expert, ``{expert}`` rows) or top-k / E of its fused ``[E, …]`` tensors."""
        path = entry.first.path
        experts = self.banks.get(path)
        top_k = self._top_k(path, experts) if experts is not None else None
        per_layer = entry.per_item
        if experts is None or top_k is None:
            active = per_layer
        elif per_layer == experts:
            active = top_k
        elif per_layer == 1 and all(size[:1] == (experts,) for _, size, _, role in entry.rows if role == "parameter"):
            placement = self._placement_of(layers, per_layer, per_layer)
            return replace(placement, active_share=(top_k, experts))
        else:
            self.routing_unknown.append(f"the checkpoint tensors of {path} are not one per expert of its {experts}")
            active = per_layer
        return self._placement_of(layers, per_layer, active)

    @staticmethod
    def _placement_of(layers: list[int], per_layer: int, active: int) -> Placement:
        if layers:
            return layer_placement(layers, per_layer=per_layer, active_per_layer=active)
        if per_layer > 1:
            return Placement(per_layer=per_layer, active_per_layer=active, count=per_layer, active=active)
        return MODEL_LEVEL

    def _active_unknown(self) -> str | None:
        """Why the active parameters cannot be counted, or None: a bank whose routing was not read, or a module that
        stores a top-k with no bank of experts found to apply it to (experts kept one module each)."""
        if self.routing_unknown:
            return "; ".join(dict.fromkeys(self.routing_unknown))
        if self.banks:
            return None
        routers = [
            path
            for path, module in self.modules.items()
            if (_first(module.routing, TOP_K_ATTRIBUTES) or 0) > 0
            and (_first(module.routing, EXPERT_COUNT_ATTRIBUTES) or 0) > 1
            and self._routes(path, module)
        ]
        if routers:
            return (
                f"{routers[0]} stores a top-k of {_first(self.modules[routers[0]].routing, TOP_K_ATTRIBUTES)} experts, "
                "but no module holds its experts as one bank (an expert count and their tensors)"
            )
        return None

    def _routes(self, path: str, module: ModuleRecord) -> bool:
        """Whether a module that stores a top-k routes tokens: it sets the top-k itself, or its class is a router,
        gate or MoE block reading it from its config (Gemma-4's router). Other modules holding the config (the model,
        a Mamba mixer) carry its default top-k also in a dense model, and route nothing."""
        if path in ("", self.tree.base_model):
            return False
        if any(name in module.sizes for name in TOP_K_ATTRIBUTES):
            return True
        return any(word in module.class_name.lower() for word in ROUTING_WORDS)

    def _trace_notes(self) -> None:
        trace = self.trace
        if trace.decode_skipped:
            self.notes.append(f"No decode shapes: {trace.decode_skipped}.")
        stubbed = sorted({note.module for note in trace.not_executed})
        if stubbed:
            self.notes.append(
                f"{len(stubbed)} modules cannot run on meta tensors and were traced as stand-ins returning zeros "
                f"shaped like their input ({stubbed[0]}, …): their output shapes are the stand-in's."
            )
        if not trace.prefill:
            self.notes.append("No shapes are known: the traced forward pass did not run (see the trace failures).")
        if self.unknown_inputs:
            self.notes.append(
                "A node's input shapes are given only for linear, embedding and normalization layers (worked back "
                f"from its output); {len(self.unknown_inputs)} nodes have none, and the diagram's edges carry the "
                "shapes each node received."
            )
        self.notes.append(
            "Nodes are the modules that hold parameters or saved buffers, an MLP's activation, and the "
            "parameter-free work archviz types from the built modules: attention's core and its KV cache, a "
            "recurrent mixer's convolution, recurrence or scan and their states. An edge is a tensor that passed "
            "from one node to the other in the traced prefill pass, through whatever other parameter-free operations "
            "lie between them (rotary embedding, gating, reshapes); residual additions are the dashed edges, not "
            "nodes."
        )
        self.notes.append(
            "A size is named after what sizes it in the code: an integer attribute of its module or of a module "
            "holding it (up to the nearest holding a config), a head count times a head size, or a key of that "
            "config its role is sized by; a size nothing there names alone is shown as a number."
        )
        if self.banks and not self.routing_unknown:
            self.notes.append(
                "Active parameters count top-k of each bank's routed experts, top-k and the expert count as the built "
                "modules store them (the router's top_k, the experts' num_experts)."
            )

    def _input_embedding(self, node_of_path: Mapping[str, str]) -> str | None:
        path = self.tree.input_embeddings
        return node_of_path.get(path) if path is not None else None

    def _layer_list(self, folded: list[_Folded]) -> str | None:
        """The repeated list that holds the model's (language model's) layers: the only one, else the one of
        ``num_hidden_layers`` items outside a vision or audio tower (Qwen3.5's text layers beside its vision
        blocks); None when that does not pick one."""
        lists = {i.template.split(".{layer}")[0] for entry in folded for i in entry.instances if i.layer is not None}
        if len(lists) <= 1:
            return next(iter(lists), None)
        expected = self.s.values.get("num_hidden_layers")
        sized = [prefix for prefix in lists if len(self._list_items(prefix)) == expected]
        text = [prefix for prefix in sized if not any(word in prefix.lower() for word in TOWER_WORDS)]
        return text[0] if len(text) == 1 else None

    def _list_items(self, prefix: str) -> list[tuple[str, ModuleRecord]]:
        depth = prefix.count(".") + 1
        return [(p, m) for p, m in self.modules.items() if p.startswith(prefix + ".") and p.count(".") == depth]

    def _layers(self, folded: list[_Folded]) -> list[Layer]:
        """The layer map of the model's layer list (``_layer_list``), each layer's kind from ``layer_types`` when
        the config lists them, else from its token-mixing children."""
        prefix = self._layer_list(folded)
        if prefix is None:
            return []
        items = self._list_items(prefix)
        types = self.modules[prefix].layer_types
        layers: list[Layer] = []
        for path, module in items:
            index = int(path.rsplit(".", 1)[-1])
            mixing = [
                "attention" if "attn" in name.lower() or "attention" in name.lower() else child_class
                for name, child_class in module.children.items()
                if _is_mixer(name, child_class)
            ]
            kind = types[index] if types else None
            if kind in FFN_LAYER_TYPES:
                mixer = NO_MIXER
            elif kind is not None:
                mixer = kind.replace("_", " ")
            else:  # a hybrid layer runs several (Falcon-H1: attention and a Mamba mixer side by side)
                mixer = " + ".join(dict.fromkeys(mixing)) or module.class_name
            layers.append(Layer(index=index, mixer=mixer, ffn=self._ffn(path, module)))
        return layers

    def _ffn(self, path: str, module: ModuleRecord) -> Ffn:
        """A layer's feed-forward part: MoE when a bank of routed experts is in it, dense when a child that is neither
        a token mixer nor a norm holds parameters, else none (a Nemotron-H Mamba or attention layer)."""
        if any(bank.startswith(f"{path}.") for bank in self.banks):
            return Ffn.MOE
        for name, child_class in module.children.items():
            if _is_mixer(name, child_class) or "Norm" in child_class:
                continue
            child = self.modules[f"{path}.{name}"]
            if child.parameters or child.children_own_parameters:
                return Ffn.DENSE
        return Ffn.NONE


ACTIVATION_LAYERS = frozenset({"SiLU", "GELU", "ReLU", "Tanh", "Sigmoid", "Mish", "LeakyReLU", "ELU", "Softplus"})
"""torch's activation layers an MLP may hold as its ``act_fn``."""
QUERY_NAMES = frozenset({"q_proj", "qkv_proj", "query", "qkv", "wq", "wqkv", "Wqkv", "c_attn", "query_key_value"})
"""Names transformers gives an attention module's query (or fused query-key-value) projection."""
LINEAR_ATTENTION_WORDS = ("linear", "lightning", "deltanet", "mamba", "recurrent", "retention", "rwkv")
"""Words in the class name of an attention module that mixes tokens without a softmax over scores."""
OUTPUT_NAMES = frozenset({"o_proj", "out_proj", "dense", "wo", "c_proj", "proj", "out"})
"""Names it gives the output projection."""
ROUTING_WORDS = ("router", "gate", "moe", "expert", "sparse", "topk")
"""Words in the class name of a module that routes tokens to experts."""
PROJECTION_NAMES = {
    "key": frozenset({"k_proj", "key", "wk"}),
    "value": frozenset({"v_proj", "value", "wv"}),
}
"""Names transformers gives an attention module's separate key and value projections."""
FUSED_QKV_NAMES = QUERY_NAMES - {"q_proj", "query", "wq"}
"""Names of a fused query-key-value projection."""


MIXER_CLASSES = {"gated delta net": GATED_DELTA_NET, "Mamba2": MAMBA2_MIXER, "lightning": LIGHTNING_ATTENTION}
"""The recurrent mixers with nodes of their own, by the end of transformers' class name."""
MIXER_SIZES = {
    "gated delta net": {
        "key_heads": ("num_k_heads", "linear_num_key_heads"),
        "value_heads": ("num_v_heads", "linear_num_value_heads"),
        "key_head_dim": ("head_k_dim", "linear_key_head_dim"),
        "value_head_dim": ("head_v_dim", "linear_value_head_dim"),
        "conv_kernel": ("conv_kernel_size", "linear_conv_kernel_dim"),
    },
    "Mamba2": {
        "heads": ("num_heads", "mamba_num_heads"),
        "head_dim": ("head_dim", "mamba_head_dim"),
        "groups": ("n_groups", "n_groups"),
        "state_size": ("ssm_state_size", "ssm_state_size"),
        "conv_kernel": ("conv_kernel_size", "conv_kernel"),
    },
    "lightning": {
        "heads": ("num_attention_heads", "num_attention_heads"),
        "head_dim": ("head_dim", "head_dim"),
        "block_size": ("block_size", "block_size"),
    },
}
"""Each mixer's sizes: the helper's argument -> (the module's attribute, the config key transformers sets it from)."""


INDEXER_SIZES = {
    "heads": ("num_heads", "index_n_heads"),
    "head_dim": ("head_dim", "index_head_dim"),
    "block_size": ("block_size", "index_block_size"),
    "topk_blocks": ("topk_blocks", "index_topk_blocks"),
    "local_blocks": ("local_blocks", "index_local_blocks"),
}
"""The lightning indexer's sizes, as ``MIXER_SIZES`` (the config keys are MiniMax-M3's text config's, which it sets
from ``sparse_attention_config``'s ``sparse_num_index_heads``, ``sparse_index_dim`` and so on)."""


def _sizes(table: Mapping[str, tuple[str, str]], module: ModuleRecord) -> tuple[tuple[str, Size], ...] | None:
    """The sizes ``table`` names, read off the built module; None when one is missing."""
    sizes: list[tuple[str, Size]] = []
    for argument, (name, key) in table.items():
        if name not in module.sizes:
            return None
        sizes.append((argument, (module.sizes[name], key)))
    return tuple(sizes)


def _mixer_sizes(kind: str, module: ModuleRecord) -> tuple[tuple[str, Size], ...] | None:
    """The sizes a mixer's nodes are built from, read off the built module; None when one is missing."""
    found = _sizes(MIXER_SIZES[kind], module)
    if found is None:
        return None
    sizes = list(found)
    if kind == "Mamba2":  # a chunk size is not a width: read off the config the mixer holds
        if "chunk_size" not in module.config_sizes:
            return None
        sizes.append(("chunk", (module.config_sizes["chunk_size"], "chunk_size")))
    return tuple(sizes)


@dataclass(slots=True, kw_only=True)
class _Mixer:
    """One set of sizes of a recurrent mixer (or of a sparse-attention indexer), and the layers that have it."""

    template: str
    """The mixer module's path template."""
    kind: str
    """``gated delta net``, ``Mamba2``, ``lightning`` or ``indexer``."""
    sizes: dict[str, Size]
    """Its helper's size arguments."""
    layers: list[int]
    """The layers with these sizes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Site:
    """Where a mixer's parameter-free core was added: its group, its node and the states it keeps."""

    group: str
    core: str
    states: tuple[str, ...]
    """The KV cache (attention), or the convolution's and the recurrence's states."""
    convolution: str | None = None
    """A recurrent mixer's convolution node; None for attention."""


@dataclass(slots=True, kw_only=True)
class _Core:
    """One shape of an attention module's heads and window, and the layers that have it."""

    template: str
    """The attention module's path template."""
    class_name: str
    """The attention module's class."""
    heads: tuple[Dim, Dim, Dim, Dim]
    """Query heads, key/value heads, query/key width, value width."""
    window: int | None
    """The sliding window of its windowed layers, if it has any."""
    windowed: list[int]
    """The layers that attend within the window."""
    layers: list[int]
    """The layers with this shape."""
    variants: int = 1
    """How many shapes the attention module has across its layers (titles say the layers when more than one)."""
    reads_shared_keys: bool = False
    """Whether its layers read the keys and values another layer cached and keep no cache of their own."""


def _rerouted(edges: list[DataEdge], site: _Site, nodes: Mapping[str, Node], holders: frozenset[str]) -> list[DataEdge]:
    """``edges`` with those inside ``site``'s group passed through its core (``CodeGraph._through_cores``);
    ``holders`` are the nodes of tensors a mixer holds itself and uses inside its core (sinks, ``dt_bias``)."""
    inside = {id for id, node in nodes.items() if node.group == site.group}

    def edge(source: str, target: str, shape: Shape | None) -> DataEdge:
        return DataEdge(source=source, target=target, shape=shape)

    def out(id: str) -> Shape | None:
        return nodes[id].outputs[0] if nodes[id].outputs else None

    kept: list[DataEdge] = []
    if (
        site.convolution is None
    ):  # attention: its KV cache (or the keys of the layer it shares them with) feeds its core
        cache = site.states[0] if site.states else site.core
        post = {e.target for e in edges if e.source in inside and e.target in inside and e.target not in holders}
        post -= {e.source for e in edges if e.target in post and e.source in inside}  # the output projection only
        # A projection that also feeds another module on the way to the core (q_proj into q_norm) reaches the
        # output projection past the core: a gate (Qwen3.5's gated attention), kept.
        gates = {e.source for e in edges if e.source in inside and e.target in inside - post - holders}
        for e in edges:
            if e.target in post and e.source in gates:
                kept.append(e)
            elif e.source in inside and (e.target in post or e.target in holders) and not e.from_input:
                side = e.source.rsplit(".", 1)[-1][:2] in ("k-", "v-")
                kept.append(edge(e.source, cache if side and e.source not in holders else site.core, out(e.source)))
            else:
                kept.append(e)
        if cache != site.core:
            kept.append(edge(cache, site.core, out(cache)))
        kept.extend(edge(site.core, target, out(site.core)) for target in sorted(post))
        return kept
    convolution, conv_state, state = site.convolution, site.states[0], site.states[1]
    assert convolution is not None
    weights = {e.target for e in edges if e.target in inside and "conv" in e.target.rsplit(".", 1)[-1]}
    after = {e.target for e in edges if e.source in weights | holders and e.target in inside} - holders - weights
    feeds_convolution = {e.source for e in edges if e.target in weights}
    for e in edges:
        if e.target in weights:  # into conv1d: into the convolution, which reads conv1d's weight
            kept.append(edge(e.source, convolution, out(e.source)))
        elif e.source in weights and e.target in after | holders:
            continue  # the convolution's output: into the core, drawn below
        elif (
            e.target in holders  # a tensor the mixer holds meets the data: inside the core
            or (e.source in holders and e.target in after)  # ... and what it made reaches past the core
            or (e.target in after and e.source in inside and e.source not in feeds_convolution and "-z" not in e.source)
        ):  # a projection's output that reaches the post-core modules only through the core (beta, g)
            kept.append(edge(e.source, site.core, out(e.source)))
        else:
            kept.append(e)
    kept.extend(edge(weight, convolution, out(weight)) for weight in sorted(weights))
    kept += [edge(convolution, conv_state, out(convolution)), edge(convolution, site.core, out(convolution))]
    kept.append(edge(site.core, state, out(site.core)))
    kept.extend(edge(site.core, target, out(site.core)) for target in sorted(after))
    return kept


def _in_encoder(path: str) -> bool:
    """Whether a module path is inside an image encoder (it runs on images, not on a text token)."""
    return any(word in segment.lower() for segment in path.split(".") for word in (*VISION_WORDS, "projector"))


def _counts_nothing(module: ModuleRecord) -> bool:
    """Whether a module computes nothing torch's FLOP counter counts: a lookup or a normalization."""
    name = module.class_name.lower()
    return (
        module.nn_class in ("Embedding", "LayerNorm", "GroupNorm", "RMSNorm")
        or "norm" in name
        or (name.endswith(("embedding", "embeddings")) and module.nn_class != "Linear")
    )


def _first(routing: Mapping[str, int], names: tuple[str, ...]) -> int | None:
    """The first of ``names`` a module's routing record holds."""
    return next((routing[name] for name in names if name in routing), None)


def _is_mixer(name: str, class_name: str) -> bool:
    """Whether a layer's child mixes tokens: named as a mixer (``self_attn``, ``mixer``) and not a feed-forward class
    (Nemotron-H names its MLP and MoE ``mixer`` too)."""
    return any(word in name.lower() for word in MIXER_WORDS) and not class_name.endswith(FFN_CLASS_ENDS)


ROLE_SPELLINGS = {
    "self_attn": "attention",
    "attn": "attention",
    "attention": "attention",
    "self_attention": "attention",
    "mlp": "MLP",
    "ffn": "MLP",
    "feed_forward": "MLP",
    "block_sparse_moe": "MoE",
    "moe": "MoE",
    "mixer": "mixer",
}
"""Attribute names that only say a module's role, shown as the role in a title (``self_attn`` -> attention)."""


def _role(attr: str, class_name: str) -> str | None:
    """What a module is, from transformers' class name and its attribute name: attention, MoE, MLP, experts,
    router, norm, embedding or head; None when neither says."""
    name, lowered = class_name.lower(), attr.lower()
    if "experts" in name or lowered == "experts":
        return "experts"
    if "router" in name or "router" in lowered:
        return "router"
    if "attn" in lowered or "attention" in lowered or name.endswith("attention"):
        return "attention"
    if (
        name.endswith(("moeblock", "moe", "sparseblock"))
        or "sparsemoe" in name
        or lowered in ("moe", "block_sparse_moe")
    ):
        return "MoE"
    if any(word in lowered for word in ("mlp", "ffn", "feed_forward")) or name.endswith("mlp"):
        return "MLP"
    if "norm" in name:
        return "norm"
    if name.endswith("embedding") or name.endswith("embeddings"):
        return "embedding"
    if lowered.endswith("head"):
        return "head"
    return None


def _place_word(attr: str, class_name: str) -> str:
    """How one module on a node's path reads in its title: a tower, a role, else its attribute spelled out."""
    lowered = attr.lower()
    if lowered in ROLE_SPELLINGS:
        return _role(attr, class_name) or ROLE_SPELLINGS[lowered]
    if any(word in lowered for word in ("vision", "visual", "image")):
        return "vision tower"
    if any(word in lowered for word in ("audio", "speech")):
        return "audio tower"
    return attr.replace("_", " ").replace("attn", "attention")


def _layer_ranges(layers: list[int]) -> str:
    """Layer indices as ranges (``0–2, 4``)."""
    runs: list[list[int]] = []
    for layer in sorted(layers):
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)


_Sized = Mapping[str, tuple[int, str, tuple[str, ...]]]
"""Name -> (value, formula, config keys) of the sizes one module offers."""


def _named(sizes: _Sized) -> list[Dim]:
    """Named sizes as dimensions: labelled by the name, the formula saying where each was read."""
    return [
        Dim(symbol=name, label=name, value=value, formula=formula, config_keys=keys)
        for name, (value, formula, keys) in sizes.items()
    ]


def _head_products(counts: _Sized, sizes: _Sized) -> _Sized:
    """Each head count of ``counts`` times each head size of ``sizes`` (``num_key_value_heads·head_dim``): the
    width of a projection that makes that many heads of that size."""
    return {
        f"{count}·{size}": (n * d, f"{count_formula} × {size_formula}", (*count_keys, *size_keys))
        for count, (n, count_formula, count_keys) in counts.items()
        if HEAD_COUNT.fullmatch(count.rsplit(".", 1)[-1])
        for size, (d, size_formula, size_keys) in sizes.items()
        if HEAD_SIZE.fullmatch(size.rsplit(".", 1)[-1])
    }


def _config_keys_of(attr: str, class_name: str) -> tuple[str, ...]:
    """The keys of its config a module is sized by, from its role (``role``)."""
    role = _role(attr, class_name)
    if role == "attention":
        return ATTENTION_CONFIG_KEYS
    return () if role in ("MLP", "MoE", "experts", "router") else MODEL_CONFIG_KEYS


FUSED = re.compile(r"gate_up|up_gate|qkv|_ba$|w13|w1w3")
"""Attribute names of a projection that computes several at once (``gate_up_proj``, ``in_proj_qkvz``): its
output width is the sum of theirs (MiniMax-M3's shared ``gate_up_proj`` is 2 × 3,072, not its 6,144
``hidden_size``)."""


def _fused(path: str) -> bool:
    """Whether the module at ``path`` is a fused projection (``FUSED``), whose output width no single size names."""
    return FUSED.search(path.rsplit(".", 1)[-1].lower()) is not None


def _factor_name(dim: Dim) -> str:
    """A tensor row's factor: the dimension's name, else its number."""
    return dim.label if dim.label != "dim" else str(dim.value)


def _fold_experts(
    rows: list[tuple[str, tuple[int, ...], str, str]],
) -> tuple[list[tuple[str, tuple[int, ...], str, str]], int]:
    """Rows that repeat per expert (``experts.3.w1.weight``) as ``{expert}`` rows and the expert count."""
    by_template: dict[tuple[str, tuple[int, ...], str, str], set[int]] = {}
    for name, size, dtype, role in rows:
        segments = name.split(".")
        position = next((i for i, segment in enumerate(segments) if segment.isdigit()), None)
        if position is None:
            return rows, 1
        index = int(segments[position])
        segments[position] = "{expert}"
        by_template.setdefault((".".join(segments), size, dtype, role), set()).add(index)
    indices = {frozenset(found) for found in by_template.values()}
    if len(indices) != 1:
        return rows, 1
    found = indices.pop()
    count = len(found)
    if count < 2 or found != frozenset(range(count)):
        return rows, 1
    names = [template for template, _, _, _ in by_template]
    if len(names) != len(set(names)) or len(by_template) * count != len(rows):
        return rows, 1
    return list(by_template), count


# -- locators, made per graph from the module paths, for the provenance stage ---------------------------------

# A generic node's title ends with its module's class in parentheses (``layer · attention · q_proj (Linear)``):
# generic.CodeGraph._title.
_GENERIC_TITLE = re.compile(r"(?P<names>.+) \((?P<cls>[A-Za-z_][A-Za-z0-9_]*)\)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def locators(graph: Graph, source: SourceFile) -> tuple[dict[str, Locator], dict[str, Locator]]:
    """Locators for a generic graph's nodes and groups, read off their module paths.

    A node built with a locator keeps it. Any other node stands for ``self.<attribute>`` of the module class that
    owns it (its code, ``self.q_proj``, is its module path's last component; a module holding parameters besides
    its children names those). The
    owner is its group's class when the node sits directly in its parent module's group, else the only
    class of ``source`` whose ``__init__`` assigns the attribute; the sites are that assignment and its
    uses in ``forward`` (and the methods ``forward`` calls). A node whose owner the file does not define,
    or which several classes could own, gets no sites and says why.
    """
    built = class_attributes(source)
    groups = {group.id: group for group in graph.groups}
    nodes = {
        # A node built with its own locator (attention's core, a mixer's recurrence) keeps it.
        node.id: node.locate or _generic_node_locator(node, groups, built, source)
        for node in graph.nodes
    }
    group_locators = {
        group.id: locator
        for group in graph.groups
        if (locator := _generic_group_locator(group, built, source)) is not None
    }
    return nodes, group_locators


def _generic_node_locator(
    node: Node, groups: Mapping[str, Group], built: Mapping[str, frozenset[str]], source: SourceFile
) -> Locator:
    title = _GENERIC_TITLE.fullmatch(node.title)
    group = groups.get(node.group)
    category = _generic_category(title.group("cls") if title else "", group)
    parts = node.code.split(", ")
    attributes = [part.removeprefix("self.") for part in parts]
    if not all(part.startswith("self.") and _IDENTIFIER.fullmatch(part[5:]) for part in parts):
        why = f"{node.title} is not an attribute of a module class (its code is {node.code})"
        return Locator(claim=f"{node.title}.", category=category, sites=(), absent=why)
    owner = _generic_owner(node, group)
    if owner is not None and owner not in built:
        why = f"its owner {owner}, which builds self.{attributes[0]}, is not defined in {source.path}"
        return Locator(claim=f"{owner} builds {node.title}.", category=category, sites=(), absent=why)
    if owner is None:
        candidates = [name for name, names in built.items() if attributes[0] in names]
        if len(candidates) != 1:
            said = ", ".join(candidates) if candidates else "no class"
            why = (
                f"the node does not say which module class owns self.{attributes[0]}, and {said} in "
                f"{source.path} {'builds' if len(candidates) < 2 else 'build'} it"
            )
            return Locator(claim=f"{node.title}.", category=category, sites=(), absent=why)
        owner = candidates[0]
    classes = (owner,)
    sites = tuple(site for name in attributes for site in attribute(classes, name))
    module_class = title.group("cls") if title else None
    what = ", ".join(f"self.{name}" for name in attributes)
    if module_class is not None and module_class != owner:
        what += f" ({module_class})"
    used = any(find_site(site, source) for site in sites if site.role is Role.USE)
    them = "them" if len(attributes) > 1 else "it"
    claim = f"{owner} builds {what} in __init__" + (f" and uses {them} in its forward pass." if used else ".")
    return Locator(claim=claim, category=category, sites=sites)


def _generic_owner(node: Node, group: Group | None) -> str | None:
    """The class of the module that owns the node's attribute, when the node's group is that module's.

    Group and node ids are both made from module paths, so the node sits directly in its owner's group
    when its id is the group's id and one more component. The root group is the root module, titled after
    the architecture it is built as: it owns the nodes of one component (``lm_head``, T5's ``shared``),
    while deeper ones in it belong to the base model a task model wraps (``model.embed_tokens``), which
    has no group of its own and so is not named.
    """
    if group is None or not _IDENTIFIER.fullmatch(group.title):
        return None
    if group.parent is None:
        return group.title if "." not in node.id else None
    rest = node.id.removeprefix(f"{group.id}.")
    return group.title if rest != node.id and "." not in rest else None


def _generic_category(module_class: str, group: Group | None) -> Category:
    if module_class.endswith("Embedding"):
        return Category.EMBEDDING
    if "Norm" in module_class:
        return Category.NORM
    kinds = {
        GroupKind.ATTENTION: Category.ATTENTION,
        GroupKind.MLP: Category.MLP,
        GroupKind.MOE: Category.MOE,
        GroupKind.EXPERTS: Category.MOE,
        GroupKind.BLOCK: Category.BLOCK,
    }
    return kinds.get(group.kind, Category.TRANSFORMER) if group is not None else Category.TRANSFORMER


def _generic_group_locator(group: Group, built: Mapping[str, frozenset[str]], source: SourceFile) -> Locator | None:
    """A group is a module class (the root group its architecture): its ``__init__`` and ``forward``."""
    if group.title not in built:
        return None
    classes = (group.title,)
    sites = (method(classes, "__init__"), method(classes, "forward"))
    runs = find_site(sites[1], source)
    if group.parent is None:
        claim = f"{group.title} builds the model in __init__" + (" and runs it in its forward pass." if runs else ".")
    else:
        claim = f"{group.title} builds this group's modules in __init__" + (
            " and runs them in its forward pass." if runs else "."
        )
    return Locator(claim=claim, category=_generic_category(group.title, group), sites=sites)
