"""The typed operator graph: plain, frozen data.

A graph lists, in forward order, every operator and tensor state of a model's forward pass. Repeated
structure is stored once with its placement (one routed expert node standing for 384 experts in each of
60 layers), so the per-instance parameters times the instance count, summed over the nodes, is the
model's total. Containers (a block, the MoE, the model) are ``Group``s that name their members.

Nothing here does I/O or display; ``archviz.graph.shapes`` renders shapes and ``archviz.graph.totals`` adds up.
This module must not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from archviz.code.locators import Locator
from archviz.graph.naming import NO_RENAMES, NamingMap


class NodeKind(StrEnum):
    """What a node is."""

    LEARNED = "learned"
    """An operator that owns learned parameters (a linear projection, a norm, an embedding table)."""
    OPERATOR = "operator"
    """A parameter-free operator (an activation, a residual add, a split, attention's core)."""
    TENSOR = "tensor"
    """A tensor state between operators (the embedded state, the residual stream, the logits)."""


class GroupKind(StrEnum):
    """What a group of nodes is."""

    MODEL = "model"
    BLOCK = "block"
    ATTENTION = "attention"
    MLP = "mlp"
    MOE = "moe"
    EXPERTS = "experts"
    MTP = "mtp"
    VISION = "vision"
    """A vision encoder beside the language model (Kimi-K2.5's vision tower): it runs on images, not tokens."""
    PROJECTOR = "projector"
    """What maps the vision encoder's features into the language model's width (Kimi-K2.5's mm_projector)."""


class InstanceUnit(StrEnum):
    """What the instances of a repeated node are."""

    EXPERT = "expert"
    """One of the routed experts (a node inside an experts group)."""
    INSTANCE = "instance"
    """Any other repeat (a shared expert is not one of the routed experts)."""


class Part(StrEnum):
    """Which part of the checkpoint a node belongs to."""

    MAIN = "main"
    """The model that the forward pass runs; counted in the total."""
    MTP = "mtp"
    """Multi-token-prediction layers: shipped in the checkpoint, reported apart from the total."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Dim:
    """One dimension of a symbolic shape."""

    symbol: str
    """Short symbol (``B``, ``T``, ``d``); symbolic dimensions are shown by it."""
    label: str
    """What the dimension counts (``batch``, ``positions``, ``d``)."""
    value: int | None = None
    """The fixed size, when the config sets it; None for batch and sequence dimensions."""
    formula: str | None = None
    """How the value follows from the config, in config names (``num_attention_heads × v_head_dim``)."""
    config_keys: tuple[str, ...] = ()
    """The config keys the value comes from."""
    decode_value: int | None = None
    """The size during single-token decode, when it differs from prefill (1 for ``T``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """The shape of one tensor flowing into or out of a node."""

    name: str
    """The tensor's name in the modeling code (``input_ids``, ``hidden_states``)."""
    dims: tuple[Dim, ...]
    """Its dimensions, outermost first."""
    dtype: str | None = None
    """Its element type where the code fixes one (``float32`` logits); None means the model's dtype."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Factor:
    """One factor of a parameter count: a config expression and its value."""

    name: str
    """The expression in config names (``vocab_size``, ``qk_nope_head_dim + qk_rope_head_dim``)."""
    value: int
    """Its value for this config."""

    @property
    def term(self) -> str:
        """The expression as a factor of a product: a sum or a difference in parentheses
        (``(qk_nope_head_dim + qk_rope_head_dim)``), so that ``heads × (a + b) × rank`` reads as it is computed."""
        return f"({self.name})" if _sum_outside_parentheses(self.name) else self.name


def _sum_outside_parentheses(text: str) -> bool:
    """Whether ``text`` adds or subtracts outside any parentheses (``a + b``, ``(a) + b``; not ``h × (a + b)``)."""
    depth = 0
    for position, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char in "+-−" and text[position - 1 : position] == " ":
            return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredTensor:
    """One tensor a packed-quantized weight is stored as (``weight_packed``, ``weight_scale``, ``weight_shape``)."""

    suffix: str
    """Its name after the module's (``weight_packed``): it replaces the module's ``weight``."""
    shape: tuple[int, ...]
    """Its shape in the checkpoint."""
    dtype: str
    """Its dtype, as safetensors names it (``I32``)."""
    role: str
    """``packed`` (the weight's values, several to an element), ``scale``, ``zero point``, ``index`` (GPTQ's
    ``g_idx``, each input's group) or ``shape`` (the logical shape, as integers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Packing:
    """How a weight is stored quantized (compressed-tensors' formats, MXFP4): the tensors that replace it."""

    method: str
    """The quantization method and format (``compressed-tensors pack-quantized``, ``mxfp4``)."""
    scheme: str
    """The scheme in words (``int4, groups of 32, symmetric``)."""
    stored: tuple[StoredTensor, ...]
    """What the checkpoint holds instead of ``weight``, per instance."""
    dense: tuple[str, ...] = ()
    """Checkpoint names of instances of the weight the config leaves unquantized (its ignore list naming some layers
    only): those are stored as the row says."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorRow:
    """One checkpoint tensor a node owns, per instance: a row of the card's calculation table."""

    component: str
    """What the tensor is (``q_a_proj weight``)."""
    tensor: str
    """Checkpoint name template, with ``{layer}`` and ``{expert}`` placeholders where repeated."""
    shape: tuple[int, ...]
    """Its shape in the checkpoint."""
    factors: tuple[Factor, ...]
    """The calculation in config terms; their product is ``elements``."""
    elements: int
    """Number of elements (parameters, for a weight)."""
    dtype: str
    """Its dtype in the checkpoint, as safetensors names it (``BF16``, ``F8_E4M3``, ``F32``)."""
    scale_block: tuple[int, int] | None = None
    """For block-quantized weights: the block, which implies a ``weight_scale_inv`` tensor."""
    module: str | None = None
    """The torch class of the module holding the tensor (``Linear``, ``Embedding``), where quantization schemes that
    target modules by class need it; None when no scheme could target it (norms, routers' raw parameters)."""
    packed: Packing | None = None
    """For a weight stored packed-quantized: what the checkpoint holds instead (``elements`` and ``dtype`` stay the
    logical weight's, the parameters it stands for)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where a node's instances are and how many of them run per token."""

    layers: tuple[int, ...] = ()
    """Checkpoint layer indices (0-based, as in ``model.layers.{layer}``); empty for model-level nodes."""
    per_layer: int = 1
    """Instances in each of those layers (384 routed experts)."""
    active_per_layer: int = 1
    """Instances a token runs through in each layer (8 of 384 routed experts)."""
    count: int = 1
    """Total instances: ``len(layers) * per_layer``, or 1 for a model-level node."""
    active: int = 1
    """Instances a token runs through in all: ``len(layers) * active_per_layer``."""
    active_share: tuple[int, int] | None = None
    """For a node whose one instance is a whole bank of routed experts held in fused tensors, each ``[E, …]``
    (gpt-oss's ``experts.gate_up_proj``): the experts a token runs through and the experts in the bank, ``(4, 32)``;
    a token runs through that share of each active instance's parameters. None when it runs through whole
    instances."""


SettingScalar: TypeAlias = bool | int | float | str
"""One value a setting holds: a flag, a count, a real number or words."""
SettingValue: TypeAlias = SettingScalar | tuple[SettingScalar, ...]
"""What a setting holds: one value, or several read together (β fast and β slow)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """A number or choice that shapes what an operator does (not a parameter)."""

    name: str
    """What it is (``softmax scale``, ``top-k``)."""
    value: SettingValue
    """Its value, typed: a count (``4``), a real number (``1e-06``), a flag, words (``causal``, ``4 of 8``), or a
    tuple of values read together; ``archviz.present.numbers.setting_text`` shows it."""
    note: str | None = None
    """What the value needs said beside it (``training only``, ``the whole head``); None when nothing."""
    formula: str | None = None
    """How it follows from the config, in config names."""
    config_keys: tuple[str, ...] = ()
    """The config keys it comes from."""


class OpKind(StrEnum):
    """How an operator's FLOPs are counted (torch's ``FlopCounterMode`` convention: 2 per multiply-add of
    matmul-like ops; element-wise ops, norms, softmax and lookups count 0)."""

    LINEAR = "linear"
    """Each input vector times the node's 2-D weights: 2 × input vectors × Σ out × in."""
    EXPERTS = "experts"
    """A routed expert: each token's vector through the weights of the top-k experts it is routed to."""
    ATTENTION = "attention"
    """Scaled dot-product attention: 2 × B × heads × queries × keys × (query/key width + value width)."""
    CONVOLUTION = "convolution"
    """A depthwise causal convolution: 2 × B × channels × kernel × output positions."""
    CHUNKED_RECURRENCE = "chunked recurrence"
    """A chunked linear-attention recurrence with a decay per channel (KDA's gated delta rule): matmuls within and
    between chunks in prefill; element-wise steps, so 0, in decode."""
    GATED_DELTA_RULE = "gated delta rule"
    """The chunked gated delta rule with one decay per head (Qwen3-Next's and Qwen3.5's gated delta net): its
    within-chunk system is solved by a triangular solve the counter does not count; element-wise decode steps."""
    SCAN = "chunked scan"
    """Mamba2's chunked state-space scan (SSD): matmuls within chunks, a pass over every pair of chunk boundaries
    in prefill; one state read per head in decode."""
    LIGHTNING = "lightning attention"
    """MiniMax's lightning attention (linear attention with a decay per head, in blocks): within each block the
    decayed scores times the values, across blocks the state read and updated; in decode the state updated by the new
    key and value and read by the query."""
    INDEX_SCORES = "index scores"
    """A sparse-attention indexer's scores (MiniMax-M3's lightning indexer): each query's index heads against every
    cached index key, 2 × B × index heads × queries × keys × index width; the block pooling and top-k that pick the
    key blocks count 0, and so does the mask they make."""
    CACHE = "cache"
    """Writes to the layer's cache what each position keeps for later steps (no FLOPs; cache bytes)."""
    STATE = "state"
    """A fixed-size per-sequence state of a layer (no FLOPs; state bytes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """What an operator computes, for the cost model: its kind and what bounds it."""

    kind: OpKind
    """How its FLOPs (or bytes) are counted."""
    window: int | None = None
    """For attention and its cache: the sliding window in the layers ``windowed_layers`` name (the cache keeps
    ``window − 1`` past positions there)."""
    windowed_layers: tuple[int, ...] = ()
    """Checkpoint indices of the layers the window applies to."""
    chunk: int | None = None
    """For a chunked recurrence or scan: the chunk size prefill pads the sequence to (64 in transformers' delta-rule
    fallbacks; Mamba2's ``chunk_size``); for lightning attention, the block size it cuts the prompt into (not
    padded)."""
    top_k: str | None = None
    """For routed experts: the config key of the experts per token (``num_experts_per_tok``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """An operator or a tensor state of the forward pass."""

    id: str
    """Stable, URL-safe identifier (``token-embedding``, ``moe.routed-expert``)."""
    title: str
    """Human title (``Token embedding``)."""
    kind: NodeKind
    """Learned operator, parameter-free operator or tensor state."""
    code: str
    """The expression in the modeling code that computes it (``self.embed_tokens(input_ids)``)."""
    summary: str
    """One plain sentence saying what it does."""
    group: str
    """Id of the innermost group that contains it."""
    inputs: tuple[Shape, ...] = ()
    """Tensors it reads; empty for a tensor state."""
    outputs: tuple[Shape, ...] = ()
    """Tensors it produces; a tensor state has exactly one, itself."""
    parameters: tuple[TensorRow, ...] = ()
    """Learned tensors per instance."""
    buffers: tuple[TensorRow, ...] = ()
    """Persistent buffers per instance that checkpoints carry (``e_score_correction_bias``)."""
    placement: Placement = Placement()
    """How many instances exist and where."""
    settings: tuple[Setting, ...] = ()
    """Hyperparameters that shape the operator."""
    config_keys: tuple[str, ...] = ()
    """Every config key the node's shapes, parameters and settings use."""
    part: Part = Part.MAIN
    """Main model or multi-token-prediction layers."""
    shares_parameters_with: str | None = None
    """Id of the node whose weight this one reuses (a tied output head), counted there once."""
    locate: Locator | None = None
    """How to find the node in its family's modeling code (provenance runs it); None when nothing says."""
    op: Op | None = None
    """What it computes, for the cost model; None for tensor states and operators that cost nothing counted."""
    traced_module: str | None = None
    """For a tensor state, the module whose first output it is, with ``{layer}`` for a layer
    (``model.layers.{layer}.self_attn``), which the shape check compares it with; in the checkpoint's names, which
    ``Graph.naming`` maps to transformers' module paths where they differ; None when no module outputs it alone."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """A container of nodes: the model, a block, the attention, the MoE."""

    id: str
    """Stable, URL-safe identifier."""
    title: str
    """Human title."""
    kind: GroupKind
    """What kind of container it is."""
    summary: str
    """One plain sentence saying what it does."""
    members: tuple[str, ...]
    """Ids of the nodes and groups directly inside it, in forward order."""
    placement: Placement = Placement()
    """Where its instances are."""
    parent: str | None = None
    """Id of the enclosing group; None for the model."""
    locate: Locator | None = None
    """How to find the group's code (its class, its forward), for contextual evidence; None when nothing says."""


class Mixer(StrEnum):
    """The token mixers the hand-written families name in the layer map (a graph read off the code names its own)."""

    MLA = "MLA"
    """Multi-head latent attention (DeepSeek-V3, Kimi-K2, Kimi Linear's full-attention layers)."""
    KDA = "KDA"
    """Kimi Delta Attention, a linear-attention recurrence (Kimi Linear)."""
    ATTENTION = "attention"
    """Softmax attention over every cached position (the llama-style decoders)."""
    SLIDING_WINDOW = "sliding-window attention"
    """Softmax attention over the last positions only (Mistral, Qwen2's windowed layers)."""


class Ffn(StrEnum):
    """A layer's feed-forward part in the layer map."""

    DENSE = "dense"
    """One MLP every token runs through."""
    MOE = "MoE"
    """A router and experts, each token running through the few it picks."""
    NONE = "none"
    """No feed-forward part: the layer is a token mixer alone (Nemotron-H's Mamba and attention layers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """What one decoder layer is made of: the layer map of the overview."""

    index: int
    """Checkpoint layer index (``model.layers.{index}``)."""
    mixer: str
    """Its token mixer (a ``Mixer``; a graph read off the code names its own)."""
    ffn: Ffn
    """Its feed-forward part."""
    part: Part = Part.MAIN
    """Main model or multi-token-prediction layer."""


UNQUANTIZED = "the predicted checkpoint holds the unquantized weights"
"""What every sentence about a declared quantization the graph does not model says: its weight bytes are then an
estimate (the weights as they would be unquantized), not the checkpoint's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Assumption:
    """A value the config lacks, supplied by the user or a bundled model's documentation, and said so."""

    key: str
    """The config key."""
    value: str
    """Its value, as JSON text."""
    source: str
    """Where the value comes from (``--assume``, or the document that states it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """Which model a graph describes."""

    name: str
    """How the user named it (a bundled name, a folder, a repo id)."""
    model_type: str
    """``model_type`` as the config says it (``kimi_k2``)."""
    family: str
    """The graph family that built it (``deepseek_v3``)."""
    transformers_model_type: str
    """The model_type whose transformers class implements it (``deepseek_v3``)."""
    architecture: str | None
    """The config's first ``architectures`` entry."""
    repo: str | None
    """Hub repository id, when known."""
    revision: str | None
    """Revision of the config and checkpoint, when known."""
    config_path: str
    """The config file, as messages and citations name it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataEdge:
    """A tensor that passes from one node to another in a traced forward pass (a graph read off the code)."""

    source: str
    """The producing node's id, or the model input's name (``input_ids``) when ``from_input``."""
    target: str
    """The consuming node's id."""
    shape: Shape | None
    """The tensor as the consumer received it."""
    residual: bool = False
    """A residual connection: the stream entering a block, added to a sublayer's output on its way to ``target``."""
    from_input: bool = False
    """Whether ``source`` is a model input rather than a node."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Graph:
    """A model's forward pass as typed nodes and groups."""

    model: ModelInfo
    """Which model this is."""
    nodes: tuple[Node, ...]
    """Operators and tensor states, in forward order."""
    groups: tuple[Group, ...]
    """Containers; the first is the model."""
    dtype: str
    """The checkpoint's unquantized dtype as safetensors names it (``BF16``)."""
    input_embedding: str | None
    """Id of the token-embedding node, for the active count that leaves it out."""
    layers: tuple[Layer, ...] = ()
    """Every decoder layer's mixer and FFN kind, in order (MTP layers last)."""
    not_modelled: tuple[str, ...] = ()
    """Parts of the model the graph does not describe, each said in one sentence (a quantization not modelled says
    ``UNQUANTIZED``)."""
    notes: tuple[str, ...] = ()
    """How the graph was read, one sentence each (a graph read off the code: what its nodes and sizes are, what the
    traced pass did not reach): what a reader should know, never a part left out."""
    assumptions: tuple[Assumption, ...] = ()
    """Values the graph used that the config does not set."""
    partial: bool = False
    """Whether the config was incomplete and only part of the model was built (``--partial``)."""
    derived_from_code: bool = False
    """Whether the graph was read off the modeling code rather than built from an independent table: then the
    meta-device model is not an independent witness, and the three-way check has two independent legs."""
    kept_from_quantization: tuple[str, ...] = ()
    """For a graph read off the code, the module-name parts its class keeps out of quantization
    (``BuildRecord.kept_from_quantization``), which transformers' quantizers add to ``modules_to_not_convert``; empty
    for a hand-written family."""
    beyond_transformers: tuple[str, ...] = ()
    """Features of this config that transformers' class for the model_type does not implement; the meta-device
    model cannot witness a graph that has any."""
    active_unknown: str | None = None
    """Why the parameters a token runs through cannot be counted (a MoE whose routing the code does not say), in
    one sentence; None when they can. Then the totals give no active count rather than the total."""
    unpriced: tuple[str, ...] = ()
    """What the cost model cannot price, one sentence each (a generic graph's modules of a kind it does not type);
    empty when it prices every node that computes. With any, FLOPs, cache and state are unknown, never partial sums."""
    flow: tuple[DataEdge, ...] | None = None
    """For a graph read off the code, the data flow between its nodes as the traced prefill pass ran it, each repeated
    block once (its edges from one layer to the next are its entry and exit); None for a graph that carries no traced
    flow (the hand-written families' is read off their tensors' names)."""
    trace_failures: tuple[str, ...] = ()
    """For a graph read off the code: each traced forward pass that raised, as the module and the error (``the
    prefill pass raised in model.layers.0.mlp: RuntimeError: …``); its shapes are then missing."""
    omitted: tuple[str, ...] = ()
    """Config parts the graph, and so its totals and predicted checkpoint, leave out (``audio_config``,
    ``quantization_config``), each also said in ``not_modelled``: a check that agrees agrees on the modelled part."""
    layer_keys: tuple[str, ...] = ()
    """The config keys that place the layers (the layer count, which are dense or MoE, which mixer each has, the
    MTP layers), as the family reads them; the overview marks those the config sets."""
    naming: NamingMap = NO_RENAMES
    """The renames between its checkpoint names (``TensorRow.tensor``, ``Node.traced_module``) and transformers'
    module paths, where they differ (``archviz.graph.naming``): every leg looks the graph's names up through it."""

    def instance_unit(self, node: Node) -> InstanceUnit:
        """What a node's instances are: experts inside an experts group, else plain instances (a shared expert is
        not one of the routed experts)."""
        kind = next((group.kind for group in self.groups if group.id == node.group), None)
        return InstanceUnit.EXPERT if kind is GroupKind.EXPERTS else InstanceUnit.INSTANCE
