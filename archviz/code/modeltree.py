"""What the meta stage reads off transformers' modeling code, as plain data: the module tree and the shape trace.

The transformers adapter (``archviz.transformers.module_tree``) builds the real model on torch's meta device and
fills these records; the generic family (``archviz.families.generic``) builds its graph from them alone. Data flows one
way, and this module imports neither torch, transformers nor the adapter: a graph builder can take these records
without loading any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

Shape = tuple[int, ...]
"""A tensor shape, e.g. ``(2048, 7168)``."""

TOP_K_ATTRIBUTES = ("top_k", "num_experts_per_tok", "top_k_experts")
"""The attribute names transformers' MoE modules (and configs) store the experts a token is routed to under."""

EXPERT_COUNT_ATTRIBUTES = ("num_experts", "num_local_experts", "n_routed_experts")
"""The attribute names they store the routed-expert count under."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceNote:
    """Something ``archviz.transformers.tracing.trace_shapes`` has to report about one module in one pass."""

    phase: str
    """``"prefill"`` or ``"decode"``."""
    module: str
    """The module path (``model.layers.1.mlp.experts``); ``""`` is the whole model."""
    message: str
    """What happened, in one sentence."""
    internal: bool = False
    """Whether what raised is archviz's own code (a bug in archviz), not the modeling code."""


class CallKind(StrEnum):
    """What a recorded call of the traced data flow is."""

    MODULE = "module"
    """A module's forward, from its pre-hook to its hook."""
    PARAMETERS = "parameters"
    """An operation that combines a module's parameters (or saved buffers) with data, run by code other than that
    module's own leaf forward: ``self.conv1d.weight`` used by its owner, an attention module's ``sinks`` joining the
    attention logits, a module's own ``dt_bias`` beside its children."""
    INPUT = "input"
    """A tensor the model was called with (``input_ids``); its path is the argument's name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedRead:
    """One tensor a call read (or returned), and the nearest recorded call whose output it derives from."""

    source: int
    """Index in ``ShapeTrace.calls`` of that call: the tensor is its output, or computed from its output by
    parameter-free operations (views, arithmetic, activations, attention's math, concatenation, masking)."""
    output: int = 0
    """Which of the tensors that call returned, depth first (an attention module returns its output and its
    weights; a decoder layer reads the first alone)."""
    shape: Shape
    """The tensor's shape as the reading call received it (as the call returned it, for a return)."""
    residual: bool = False
    """Whether it reached the tensor through the residual side of an addition inside a repeated block: the operand
    that descends from the block's input, added to a sublayer's output (``residual + hidden_states``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedCall:
    """One call of the traced prefill pass, with where its tensor inputs came from."""

    path: str
    """The module path (``model.layers.0.self_attn.q_proj``; ``""`` is the whole model), or the model input's
    name for an ``INPUT``."""
    kind: CallKind
    """A module's forward, a use of a module's parameters, or a model input."""
    reads: tuple[TracedRead, ...]
    """The origins of the tensors it was given, one per (source, residual) pair, in argument order."""
    returns: tuple[tuple[TracedRead, ...], ...] = ()
    """For each tensor it returned (depth first), that tensor's origins as computed inside it, before it became the
    call's own output: how a reader sees through a module that is no node of the graph (a decoder layer, an
    attention module)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeTrace:
    """Output shapes of every module in a prefill and a decode forward pass on meta tensors."""

    batch_size: int
    """Sequences in the batch (``B``)."""
    prefill_tokens: int
    """Tokens in the prefill pass (``T``): its input is ``input_ids`` of shape ``(B, T)``."""
    past_tokens: int
    """Positions already in the cache for the decode pass, whose input is ``(B, 1)``."""
    experts_implementation: str | None
    """The transformers experts implementation the passes ran with (``batched_mm``), or ``None`` when
    the model has no switchable experts or it was left as built."""
    prefill: dict[str, tuple[Shape, ...]]
    """Module path -> shapes of the tensors it output in the prefill pass (first call, when a module
    runs more than once). ``""`` is the whole model."""
    decode: dict[str, tuple[Shape, ...]]
    """The same for the decode pass; empty when the model takes no cache."""
    prefill_logits: Shape | None
    """Shape of the final logits of the prefill pass, e.g. ``(2, 5, 163840)``; ``None`` if it failed."""
    decode_logits: Shape | None
    """Shape of the final logits of the decode pass, e.g. ``(2, 1, 163840)``; ``None`` if not run."""
    not_executed: tuple[TraceNote, ...]
    """Modules whose code could not run on meta tensors and were replaced by a stand-in that returns
    zeros shaped like their input; their recorded shapes come from the stand-in."""
    errors: tuple[TraceNote, ...]
    """Passes that raised, with the innermost module that was running and the error."""
    downstream: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Phase -> module path -> the stand-in module that ran before it in that pass: its recorded output may
    be computed from the stand-in's made-up zeros, so its shape is not evidence."""
    decode_skipped: str | None = None
    """Why there is no decode pass (an encoder takes no cache), when that is by design rather than an error."""
    repeats: Mapping[str, str] = field(default_factory=dict)
    """Path of each item of a module list that an earlier item of the same structure stood for (``skip_repeats``) ->
    that item's path: what ran in the one ran in the other (``model.layers.7`` -> ``model.layers.1``)."""
    calls: tuple[TracedCall, ...] = ()
    """The prefill pass's data flow: every module call, parameter use and model input in the order they began,
    each naming the calls its tensor inputs derive from (``archviz.transformers.flowtrace``). Empty when the pass
    failed or the flow was not asked for (the shape leg does not need it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorRecord:
    """One parameter or buffer a module holds directly."""

    name: str
    """Its attribute name on the module (``weight``, ``e_score_correction_bias``)."""
    shape: Shape
    """Its shape as the modeling code holds it (fused experts stay fused: ``(E, 2I, d)``)."""
    dtype: str
    """Its dtype as safetensors names it (``BF16``, ``F32``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleRecord:
    """One module of the tree: what it holds itself and what a graph needs to say about it."""

    path: str
    """Its module path (``model.layers.3.self_attn.q_proj``); ``""`` is the root."""
    class_name: str
    """Its class (``LlamaAttention``)."""
    is_module_list: bool
    """Whether it is a ``torch.nn.ModuleList`` (a list of repeated items, such as the layers)."""
    parameters: tuple[TensorRecord, ...]
    """The parameters it holds directly, in registration order, tied aliases included."""
    buffers: tuple[TensorRecord, ...]
    """The buffers it holds directly that are saved with the weights (persistent), in registration order."""
    checkpoint: dict[str, Shape]
    """Its own tensors as ``save_pretrained`` writes them: checkpoint name -> shape, for its parameters (tied
    aliases left out) and persistent buffers, put back into checkpoint layout by transformers' save-time
    reversal run on them alone (fused experts become one tensor per expert). Empty when it holds none."""
    children_own_parameters: bool
    """Whether any direct child holds parameters (at any depth below it)."""
    children: dict[str, str]
    """Its direct children: attribute name -> class name, in registration order."""
    classes_below: frozenset[str]
    """The class names of it and of every module below it."""
    epsilon: float | None
    """Its ``variance_epsilon``, else its ``eps``, when that is a float (norms)."""
    padding_index: int | None
    """Its ``padding_idx``, when that is an int (embeddings)."""
    weight_shape: Shape | None
    """The shape of its ``weight`` when that is 2-D, also when the weight is tied to another module's."""
    routing: Mapping[str, int] = field(default_factory=dict)
    """How many experts a token is routed to and how many there are, as the module stores them: its integer
    attributes named in ``TOP_K_ATTRIBUTES`` and ``EXPERT_COUNT_ATTRIBUTES`` (a router's ``top_k`` and
    ``num_experts``, an experts bank's ``num_experts``), else, for a module that sets none of them and holds a
    ``config``, those that config sets (Gemma-4's router reads ``config.top_k_experts``). Empty for most modules."""
    layer_types: tuple[str, ...] = ()
    """For a module list, the ``layer_types`` of the config its owner holds, as transformers' config object has
    them (derived where the file sets none: Qwen3-Next's from ``full_attention_interval``, Nemotron-H's from
    ``hybrid_override_pattern``), when they name one kind per item; empty otherwise."""
    sizes: dict[str, int] = field(default_factory=dict)
    """The integer attributes its modeling code set on it (``head_dim``, ``intermediate_size``), for a class the
    model's code defines (torch's own layers restate their tensors' shapes: left out); indices (``layer_idx``) left
    out."""
    config_sizes: dict[str, int] = field(default_factory=dict)
    """The integer values of the config it holds as ``self.config`` (``num_key_value_heads``), those of its text
    sub-config as ``text_config.<key>``; empty when it holds none."""
    sliding_window: int | None = None
    """Its ``sliding_window`` attribute when that is a positive int (an attention module of a windowed layer)."""
    nn_class: str | None = None
    """The torch layer it is or subclasses (``Linear``, ``Embedding``, ``Conv1d``), the nearest in its class's method
    resolution order; None for a module the model's code defines from ``nn.Module`` alone."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleTree:
    """The module tree of a model transformers built on the meta device, and the facts about it as a whole."""

    class_name: str
    """The root's class (``GptOssForCausalLM``)."""
    modules: tuple[ModuleRecord, ...]
    """Every module once, root first, in ``named_modules()`` order."""
    base_model: str | None
    """Module path of the base model a task model wraps (``model``, ``bert``); ``None`` when the root is one."""
    input_embeddings: str | None
    """Module path of the input embedding (``get_input_embeddings()``); ``None`` when the model names none."""
    tied: tuple[tuple[str, str], ...]
    """Tied weights as ``(alias, source)`` parameter paths; an alias is not in :attr:`parameters`."""
    parameters: dict[str, Shape]
    """Every parameter as the checkpoint stores it: checkpoint name -> shape (``MetaModel.parameters``)."""
    persistent_buffers: dict[str, Shape]
    """Every saved buffer: checkpoint name -> shape (``MetaModel.persistent_buffers``)."""
    total_parameters: int
    """Number of parameter elements, each tied weight counted once."""
    total_persistent_buffer_elements: int
    """Number of elements in :attr:`persistent_buffers`."""
    non_persistent_buffers: tuple[str, ...] = ()
    """Buffers the modeling code computes and never saves (rotary ``inv_freq``, BERT's ``position_ids``)."""
    built: BuildRecord | None = None
    """Which class was built from which file, and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRecord:
    """Which class the meta stage built, from which file, and how it chose it."""

    class_name: str
    """The model class instantiated (``Qwen3_5MoeForConditionalGeneration``)."""
    config_class: str
    """The config class that read the document (``Qwen3_5MoeConfig``)."""
    model_type: str
    """The ``CONFIG_MAPPING`` key of that config class."""
    chosen_by: str
    """Why this class: named by ``architectures``, or the Auto class consulted and why."""
    module_file: str
    """The file that defines the class (``modeling_qwen3_5_moe.py``)."""
    origin: str
    """``transformers`` (the installed release's own class) or ``remote`` (the model folder's code)."""
    revision: str
    """What pins the file: ``v<transformers version>``, or a content hash of the model folder's file."""
    dtype: str
    """The dtype the parameters were built in (``bfloat16``), keep-in-float32 modules aside."""
    normalisations: tuple[str, ...]
    """The recipe's normalisations, as applied."""
    kept_in_float32: tuple[str, ...] = ()
    """Name parts of the tensors transformers keeps (and saves) in float32 whatever the dtype, as the class says."""
    kept_from_quantization: tuple[str, ...] = ()
    """Module-name parts the class keeps in float32 under float16 (``_keep_in_fp32_modules``, its sub-models'
    included), which transformers' quantizers add to the modules they do not convert."""
    read_configs: tuple[str, ...] = ()
    """The document's sub-configs the class was built from (``text_config``, ``vision_config``): all of its config
    class's when built from the whole document, ``text_config`` alone when built from that."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCode:
    """A model's code as the meta stage read it: its module tree and its shape trace."""

    tree: ModuleTree
    """What every module holds."""
    trace: ShapeTrace
    """What every module output in the traced passes."""
