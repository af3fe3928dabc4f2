"""Deployment sizing: what each GPU holds under tensor, expert and pipeline parallelism, how many sequences fit beside
the weights at a context, and a roofline lower bound on a decode step and a prefill.

Weights are split tensor by tensor from the predicted checkpoint. The split follows the model's own tensor-parallel
and expert-parallel plans as transformers ships them (``base_model_tp_plan``, ``base_model_ep_plan`` of the config
class, and the causal LM's ``_tp_plan`` for ``lm_head``), restated in ``TP_PLANS`` and ``EP_PLANS`` (a test holds each
restatement to transformers' attribute); a plan entry's style name decides the split (``SPLITS``). Two conventions:

- ``transformers``: the plans as they are, with the input embedding vocabulary-parallel (``embedding_rowwise``) as
  transformers' ``init_parallel_plans`` adds it to any plan that does not name it. A module no entry names is
  replicated: DeepSeek-V3's plan names no attention projection, so MLA (and Kimi Linear's KDA) is whole on every rank.
  A split dimension is cut as torch's DTensor ``Shard`` cuts it (``torch.chunk``: ⌈n/tp⌉ per rank, the last ranks
  taking what is left).
- ``engine``: as the common serving engines split attention (vLLM, SGLang): the query, key and value projections by
  heads, the output projection by its input heads, a GQA model's KV heads replicated when TP exceeds them (each
  rank holding one), MLA's latent projections (``q_a_proj``, ``kv_a_proj_with_mqa``) and latent cache replicated;
  the embedding and the head vocabulary-parallel, the vocabulary padded to a multiple of 64. The rest (MLPs, experts,
  KDA) as transformers' plans.

Experts under expert parallelism (``--ep``, which must be 1 or the ranks of a pipeline stage, ``tp × dp``) are whole
on one rank each: ⌊E/ep⌋ per rank, the last rank taking the remainder (transformers' own EP refuses an uneven split).
Pipeline stages hold contiguous layers, ⌊L/pp⌋ each, the last stage taking the remainder; the embedding is on the first
stage, the final norm and the head on the last. Multi-token-prediction layers are left out (an engine loads them only
for speculative decoding). A block-quantization scale or a packed weight's stored tensors are cut along their weight's
dimension, in whole blocks.

This module must not import torch or transformers.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from archviz.common.dtypes import ITEMSIZE
from archviz.common.errors import InputError
from archviz.cost.model import (
    ABSORBED,
    CacheCost,
    NodeCost,
    Phase,
    Sizes,
    absorbed_costs,
    cache_bytes_at,
    cache_costs,
    modelled_in_full,
    node_costs,
)
from archviz.cost.model import priced as cost_priced
from archviz.graph.nodes import Graph, Mixer, Node, OpKind, Part
from archviz.graph.totals import (
    EXPERT,
    Experts,
    ManifestGroup,
    ManifestTensor,
    TensorRole,
    expert_names,
    manifest_groups,
    node_parts,
)

if TYPE_CHECKING:
    from archviz.families.registry import Family

PLAN_SCHEMA = "archviz.plan/1"

DEFAULT_RESERVE = 0.10
"""The share of each GPU's memory kept for activations, the runtime (CUDA context, communication buffers) and
fragmentation: 10 %, what vLLM's default ``gpu_memory_utilization = 0.9`` leaves."""

VOCAB_PADDING = 64
"""The engine convention pads the vocabulary to a multiple of this before splitting it (vLLM's
``DEFAULT_VOCAB_PADDING_SIZE``)."""

GIB = 2**30


class Convention(StrEnum):
    """How the attention and the embedding are split."""

    TRANSFORMERS = "transformers"
    """transformers' own plans, as they are."""
    ENGINE = "engine"
    """Attention split by heads, MLA's latent replicated, vocabulary-parallel embedding and head (vLLM, SGLang)."""


# -- transformers' plans, restated --------------------------------------------------------------------------------

_LLAMA_TP = {
    "layers.*.self_attn.q_proj": "colwise",
    "layers.*.self_attn.k_proj": "colwise",
    "layers.*.self_attn.v_proj": "colwise",
    "layers.*.self_attn.o_proj": "rowwise",
    "layers.*.mlp.gate_proj": "colwise",
    "layers.*.mlp.up_proj": "colwise",
    "layers.*.mlp.down_proj": "rowwise",
}
_QK_NORM = {
    "layers.*.self_attn.q_norm": "replicated_with_grad_allreduce",
    "layers.*.self_attn.k_norm": "replicated_with_grad_allreduce",
}
_EXPERTS_TP = {
    "layers.*.mlp.experts.gate_up_proj": "packed_colwise",
    "layers.*.mlp.experts.down_proj": "rowwise",
    "layers.*.mlp.experts": "moe_tp_experts",
}
_SHARED_EXPERTS_TP = {
    "layers.*.mlp.shared_experts.gate_proj": "colwise",
    "layers.*.mlp.shared_experts.up_proj": "colwise",
    "layers.*.mlp.shared_experts.down_proj": "rowwise",
}
_DENSE_MLP_TP = {key: value for key, value in _LLAMA_TP.items() if ".mlp." in key}
_ATTENTION_TP = {key: value for key, value in _LLAMA_TP.items() if ".self_attn." in key}
_DEEPSEEK_TP = {**_EXPERTS_TP, **_SHARED_EXPERTS_TP, **_DENSE_MLP_TP}

TP_PLANS: dict[str, dict[str, str]] = {
    "deepseek_v3": _DEEPSEEK_TP,
    "kimi_linear": _DEEPSEEK_TP,
    "llama": _LLAMA_TP,
    "mistral": _LLAMA_TP,
    "qwen2": _LLAMA_TP,
    "qwen3": {**_ATTENTION_TP, **_QK_NORM, **_DENSE_MLP_TP},
    "mixtral": {**_ATTENTION_TP, **_EXPERTS_TP},
    "qwen3_moe": {**_ATTENTION_TP, **_QK_NORM, **_EXPERTS_TP, **_DENSE_MLP_TP},
}
"""``base_model_tp_plan`` of transformers' config class (5.24) for the model_types of the hand-written families, keyed
relative to the base model (``model.``). Kimi-K2 and K2.5's text model are ``deepseek_v3``; Kimi-K3's is
``kimi_linear``."""

_EXPERTS_EP = {
    "layers.*.mlp.experts.gate_up_proj": "grouped_gemm",
    "layers.*.mlp.experts.down_proj": "grouped_gemm",
    "layers.*.mlp.experts": "ep_dispatch_experts",
}
EP_PLANS: dict[str, dict[str, str] | None] = {
    "deepseek_v3": _EXPERTS_EP,
    "kimi_linear": _EXPERTS_EP,
    "llama": None,
    "mistral": None,
    "qwen2": None,
    "qwen3": None,
    "mixtral": _EXPERTS_EP,
    "qwen3_moe": _EXPERTS_EP,
}
"""``base_model_ep_plan`` of the same config classes (None: the model has no experts to place)."""

HEAD_PLAN = {"lm_head": "colwise_gather_output"}
"""The causal LM's own ``_tp_plan`` (every family here): the head split by vocabulary, its logits gathered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelPlans:
    """A model's tensor- and expert-parallel plans, as transformers' classes carry them."""

    tp: Mapping[str, str]
    """``base_model_tp_plan``: module (or parameter) pattern relative to the base model -> style."""
    ep: Mapping[str, str] | None
    """``base_model_ep_plan``; None when the class has none."""
    head: Mapping[str, str]
    """The task model's own ``_tp_plan`` (``lm_head``)."""
    source: str
    """Where they were read (``transformers' DeepseekV3Config``, or archviz's restatement)."""


def text_model_type(graph: Graph, family: Family) -> str:
    """The model_type whose plans split the language model: a wrapper's text part's (Kimi-K2.5's ``deepseek_v3``),
    else the graph's own (``family``: the one that built it)."""
    part = family.builds.code_parts.get("text")
    return part.transformers_model_type if part is not None else graph.model.transformers_model_type


def restated_plans(graph: Graph, family: Family) -> ParallelPlans | None:
    """The restatement of transformers' plans for a hand-written family's language model; None for another."""
    model_type = text_model_type(graph, family)
    if model_type not in TP_PLANS:
        return None
    return ParallelPlans(
        tp=TP_PLANS[model_type],
        ep=EP_PLANS.get(model_type),
        head=HEAD_PLAN,
        source=f"transformers' plans for {model_type}, restated in archviz.cost.plan (held to transformers by a test)",
    )


class Split(StrEnum):
    """What a plan style does to the weight of the module it names."""

    OUTPUT = "output"
    """Cut the output dimension (dim −2 of a weight, dim 0 of a bias): colwise."""
    INPUT = "input"
    """Cut the input dimension (dim −1 of a weight); the bias replicated: rowwise."""
    ROWS = "rows"
    """Cut dim 0 of an embedding table (vocabulary-parallel)."""
    COLUMNS = "columns"
    """Cut dim 1 of an embedding table."""
    REPLICATE = "replicate"
    """Every rank holds the whole tensor."""
    EXPERTS = "experts"
    """Whole experts placed on the ranks (expert parallelism)."""


SPLITS: dict[str, Split] = {
    "colwise": Split.OUTPUT,
    "colwise_rep": Split.OUTPUT,
    "colwise_gather_output": Split.OUTPUT,
    "packed_colwise": Split.OUTPUT,  # gate and up each cut on their output dimension: the same per expert
    "rowwise": Split.INPUT,
    "rowwise_rep": Split.INPUT,
    "rowwise_split_input": Split.INPUT,
    "packed_rowwise": Split.INPUT,
    "embedding_rowwise": Split.ROWS,
    "embedding_colwise": Split.COLUMNS,
    "replicated_with_grad_allreduce": Split.REPLICATE,
    "replicate": Split.REPLICATE,
    "all_reduce": Split.REPLICATE,
    "sequence_parallel": Split.REPLICATE,
    "mla_kv_a_proj": Split.REPLICATE,
    "moe_tp_experts": Split.REPLICATE,  # the experts module's forward; its parameters have entries of their own
    "moe_identity_expert": Split.REPLICATE,
    "local_params": Split.REPLICATE,
    "grouped_gemm": Split.EXPERTS,
    "ep_dispatch_experts": Split.EXPERTS,
}
"""transformers' parallel styles (``ALL_PARALLEL_STYLES``) by what they do to a parameter's storage."""

_ENGINE_ATTENTION = {
    "q_proj": Split.OUTPUT,
    "k_proj": Split.OUTPUT,
    "v_proj": Split.OUTPUT,
    "q_b_proj": Split.OUTPUT,
    "kv_b_proj": Split.OUTPUT,
    "o_proj": Split.INPUT,
    "q_a_proj": Split.REPLICATE,
    "kv_a_proj_with_mqa": Split.REPLICATE,
}
"""The engine convention's attention projections (a softmax-attention or MLA layer's ``self_attn.*``)."""

_SOFTMAX_MIXERS = {Mixer.MLA, Mixer.ATTENTION, Mixer.SLIDING_WINDOW}


# -- GPUs -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """One accelerator: what it holds and how fast it reads and computes."""

    key: str
    """The ``--gpu`` name (``h200``)."""
    title: str
    """Its product name."""
    memory: int
    """Device memory in bytes, as the device reports it where a report is cited, else the capacity the vendor
    states."""
    bandwidth: int
    """HBM bandwidth, bytes per second."""
    bf16: int
    """Dense BF16 tensor throughput, FLOP/s (no structured sparsity)."""
    fp8: int | None
    """Dense FP8 tensor throughput, FLOP/s; None when it is not known (a custom GPU given no ``--fp8``)."""
    fp4: int | None
    """Dense FP4 tensor throughput, FLOP/s; None when the GPU has none."""
    interconnect: int | None
    """GPU-to-GPU bandwidth per GPU (NVLink, Infinity Fabric), bytes per second, both directions."""
    source: str
    """Where the figures come from (a datasheet's address)."""
    memory_note: str = ""
    """How the memory figure was read."""


_NVIDIA_SMI = "nvidia-smi's total for the part"
_TERA = 10**12

GPUS: dict[str, Gpu] = {
    gpu.key: gpu
    for gpu in (
        Gpu(
            key="h100",
            title="NVIDIA H100 SXM 80GB",
            memory=81_559 * 2**20,
            bandwidth=3_350 * 10**9,
            bf16=989 * _TERA,
            fp8=1_979 * _TERA,
            fp4=None,
            interconnect=900 * 10**9,
            source="https://www.nvidia.com/en-us/data-center/h100/ (H100 SXM; tensor figures halved: the sheet's are "
            "with sparsity)",
            memory_note=f"81,559 MiB, {_NVIDIA_SMI}",
        ),
        Gpu(
            key="h200",
            title="NVIDIA H200 SXM 141GB",
            memory=143_771 * 2**20,
            bandwidth=4_800 * 10**9,
            bf16=989 * _TERA,
            fp8=1_979 * _TERA,
            fp4=None,
            interconnect=900 * 10**9,
            source="https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM; tensor figures halved: the sheet's are "
            "with sparsity)",
            memory_note=f"143,771 MiB, {_NVIDIA_SMI}",
        ),
        Gpu(
            key="b200",
            title="NVIDIA B200 (HGX B200)",
            memory=183_359 * 2**20,
            bandwidth=8_000 * 10**9,
            bf16=2_250 * _TERA,
            fp8=4_500 * _TERA,
            fp4=9_000 * _TERA,
            interconnect=1_800 * 10**9,
            source="https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, 8 GPUs: figures per GPU, dense)",
            memory_note=f"183,359 MiB, {_NVIDIA_SMI}",
        ),
        Gpu(
            key="gb200",
            title="NVIDIA GB200 (one Blackwell GPU of a GB200 NVL72)",
            memory=186 * 10**9,
            bandwidth=8_000 * 10**9,
            bf16=2_500 * _TERA,
            fp8=5_000 * _TERA,
            fp4=10_000 * _TERA,
            interconnect=1_800 * 10**9,
            source="https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (GB200 superchip of two GPUs: figures per "
            "GPU, dense)",
            memory_note="186 GB, the vendor's capacity (13.4 TB over 72 GPUs); the device reports slightly less",
        ),
        Gpu(
            key="mi300x",
            title="AMD Instinct MI300X",
            memory=192 * 10**9,
            bandwidth=5_300 * 10**9,
            bf16=1_307 * _TERA,
            fp8=2_615 * _TERA,
            fp4=None,
            interconnect=896 * 10**9,
            source="https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html (dense figures)",
            memory_note="192 GB, the vendor's capacity; the device reports slightly less",
        ),
        Gpu(
            key="mi325x",
            title="AMD Instinct MI325X",
            memory=256 * 10**9,
            bandwidth=6_000 * 10**9,
            bf16=1_307 * _TERA,
            fp8=2_615 * _TERA,
            fp4=None,
            interconnect=896 * 10**9,
            source="https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html (dense figures)",
            memory_note="256 GB, the vendor's capacity; the device reports slightly less",
        ),
        Gpu(
            key="mi355x",
            title="AMD Instinct MI355X",
            memory=288 * 10**9,
            bandwidth=8_000 * 10**9,
            bf16=2_517 * _TERA,
            fp8=5_033 * _TERA,
            fp4=10_066 * _TERA,
            interconnect=1_075 * 10**9,
            source="https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html (dense figures)",
            memory_note="288 GB, the vendor's capacity; the device reports slightly less",
        ),
    )
}
"""The GPU table: each figure from the vendor's public datasheet named in ``source``."""


def gpu_named(name: str) -> Gpu:
    """The table's GPU of that name (``h200``, ``H200``); ``InputError`` for another."""
    found = GPUS.get(name.strip().lower().replace(" ", "").replace("-", ""))
    if found is None:
        raise InputError(f"unknown GPU (known: {', '.join(GPUS)})", path=f"--gpu {name}")
    return found


# -- the plan -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallelism:
    """How the GPUs are arranged: ``gpus = tp × pp × dp``."""

    tp: int = 1
    """Tensor-parallel ranks."""
    ep: int = 1
    """Expert-parallel ranks: 1 (experts split by the TP plan) or ``tp × dp`` (each expert whole on one rank)."""
    pp: int = 1
    """Pipeline stages."""
    dp: int = 1
    """Data-parallel replicas of a stage's ranks."""

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def stage_ranks(self) -> int:
        """Ranks of one pipeline stage (``tp × dp``)."""
        return self.tp * self.dp


@dataclass(frozen=True, slots=True, kw_only=True)
class Rank:
    """What one GPU holds and reads."""

    stage: int
    """Its pipeline stage."""
    index: int
    """Its rank within the stage (0 … tp × dp − 1); its TP rank is ``index mod tp``."""
    layers: tuple[int, ...]
    """The decoder layers on its stage."""
    weight_bytes: int
    """Bytes of its share of the weights."""
    weight_bytes_by_split: dict[str, int]
    """The same by how each tensor was split (``output``, ``input``, ``replicate``, ``experts`` …)."""
    experts: int
    """Routed experts per MoE layer it holds whole or a slice of (all of them under TP)."""
    cache_per_token: int | None
    """Cache bytes per cached position of one sequence on it; None when the model is not priced."""
    state_per_sequence: int | None
    """Fixed state bytes of one sequence on it."""
    cache_per_sequence: int | None
    """Cache and state of one sequence at the context."""
    free_bytes: int
    """Memory left for the cache: ``memory × (1 − reserve) − weight_bytes``."""
    sequences: int | None
    """Sequences whose cache at the context fits in ``free_bytes``."""
    decode_bytes: int | None
    """Bytes a decode step at the batch reads on it: its weights (routed experts only those the batch can reach)
    and the batch's cache at the context."""
    decode_flops: int | None
    """Its share of a decode step's FLOPs."""
    prefill_flops: int | None
    """Its share of a prefill's FLOPs."""
    cache: tuple[CacheCost, ...] = ()
    """What it keeps per sequence, layer by layer (scaled to its KV heads), for the sequences at other contexts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A deployment of one model on a set of GPUs."""

    gpu: Gpu
    """The GPU every rank is."""
    parallelism: Parallelism
    """How the GPUs are arranged."""
    convention: Convention
    """How attention and the embedding are split."""
    context: int
    """Cached positions per sequence (``S``)."""
    prompt: int
    """Tokens of the prompt the prefill bound is for (``T``)."""
    batch: int
    """Sequences per replica the roofline is evaluated at."""
    cache_dtype: str
    """The cache's dtype, as safetensors names it."""
    compute: str
    """Which throughput the prefill and decode bounds use (``bf16``, ``fp8``, ``fp4``)."""
    reserve: float
    """The share of each GPU's memory kept back (activations, runtime, fragmentation)."""
    ranks: tuple[Rank, ...]
    """Every GPU of one replica, stage by stage (the ``dp`` replicas of a stage's ranks are listed: under EP each holds
    other experts)."""
    weight_bytes: int
    """The checkpoint's bytes of the main model (what the ranks' shares add up to, replicas counted once)."""
    mtp_bytes: int
    """Bytes of the multi-token-prediction layers, left out."""
    priced: bool
    """Whether the cost model prices the graph (cache, FLOPs); a generic graph's are unknown."""
    notes: tuple[str, ...] = ()
    """What the convention is and what the bounds leave out, one sentence each."""
    splits: dict[str, str] = field(default_factory=dict)
    """Each checkpoint module pattern (``model.layers.*.self_attn.q_proj``) and how it was split, for the report."""
    checkpoint_bytes_by_split: dict[str, int] = field(default_factory=dict)
    """The main model's checkpoint bytes by how each tensor is split: a rank holds the ``replicate`` bytes whole and
    about 1/tp of the ``output``, ``input`` and ``rows`` bytes (exactly when the cut dimensions divide)."""

    @property
    def usable(self) -> int:
        return int(self.gpu.memory * (1 - self.reserve))

    @property
    def sequences(self) -> int | None:
        """Sequences at the context all GPUs hold: the tightest rank's count per replica, times ``dp``."""
        counts = [rank.sequences for rank in self.ranks]
        if any(count is None for count in counts):
            return None
        return min(count for count in counts if count is not None) * self.parallelism.dp

    def stage_max(self, value: str) -> list[int]:
        """Per stage, the largest of a rank figure (``decode_bytes``)."""
        found: dict[int, int] = {}
        for rank in self.ranks:
            number = getattr(rank, value)
            if number is not None:
                found[rank.stage] = max(found.get(rank.stage, 0), number)
        return [found[stage] for stage in sorted(found)]

    @property
    def throughput(self) -> int:
        value = {"bf16": self.gpu.bf16, "fp8": self.gpu.fp8, "fp4": self.gpu.fp4}[self.compute]
        if value is None:
            raise InputError(
                f"{self.gpu.title} has no dense {self.compute} throughput: give it with --{self.compute}, or choose "
                "another --compute",
                path=f"--compute {self.compute}",
            )
        return value

    @property
    def decode_seconds(self) -> float | None:
        """Lower bound on one decode step: per stage the slowest rank's bytes over bandwidth (or FLOPs over
        throughput, whichever is longer), stages in turn."""
        if not self.priced:
            return None
        memory = self.stage_max("decode_bytes")
        compute = self.stage_max("decode_flops")
        return sum(
            max(read / self.gpu.bandwidth, flops / self.throughput) for read, flops in zip(memory, compute, strict=True)
        )

    @property
    def decode_memory_seconds(self) -> float | None:
        if not self.priced:
            return None
        return sum(read / self.gpu.bandwidth for read in self.stage_max("decode_bytes"))

    @property
    def prefill_seconds(self) -> float | None:
        """Lower bound on a prefill of one prompt: per stage the slowest rank's FLOPs over throughput, in turn."""
        if not self.priced:
            return None
        return sum(flops / self.throughput for flops in self.stage_max("prefill_flops"))


# -- splitting a tensor ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    """How one tensor is split: along which dimension, in units of how many elements, over how many ranks."""

    split: Split
    dim: int | None = None
    unit: int = 1
    """Elements of the cut dimension that stay together (a head's width, a quantization block, 1)."""
    pad_to: int = 1
    """The cut dimension is first padded to a multiple of this (the engine's vocabulary padding)."""
    kv_heads: int = 0
    """For the engine's KV projections: the KV heads (each rank holds one when TP exceeds them)."""


def chunk(size: int, parts: int, index: int) -> int:
    """What rank ``index`` of ``parts`` holds of ``size`` as ``torch.chunk`` (DTensor's ``Shard``) cuts it:
    ⌈size/parts⌉ each, the last ranks what is left."""
    step = -(-size // parts)
    return max(0, min(step, size - index * step))


def _local_shape(shape: tuple[int, ...], rule: _Rule, tp: int, index: int, ep: int = 1) -> tuple[int, ...]:
    """What rank ``index`` holds of a tensor (its TP rank ``index mod tp``; under EP its EP rank ``index``)."""
    if rule.split is Split.EXPERTS and rule.dim == 0 and shape:
        return (local_experts(shape[0], ep, index), *shape[1:])
    index %= tp
    if rule.split in (Split.REPLICATE, Split.EXPERTS) or rule.dim is None or tp == 1:
        return shape
    dim = rule.dim % len(shape)
    size = shape[dim]
    if rule.kv_heads and tp >= rule.kv_heads:
        local = size // rule.kv_heads  # one whole KV head per rank, replicated tp / kv_heads times
    else:
        padded = -(-size // rule.pad_to) * rule.pad_to
        units = padded // rule.unit
        local = chunk(units, tp, index) * rule.unit
    return (*shape[:dim], local, *shape[dim + 1 :])


class _Name(NamedTuple):
    """A checkpoint tensor's name as transformers' plans see it."""

    key: str
    """Its module path with the layer as ``*`` (``model.layers.*.self_attn.q_proj``); a routed expert's projections
    as the fused ``gate_up_proj`` and ``down_proj`` transformers loads them into."""
    layer: int | None
    """Its decoder layer."""
    leaf: str
    """Its last part (``weight``, ``bias``, ``weight_scale_inv``)."""
    expert: int | None
    """Its routed expert."""


def _module_key(name: str, spellings: Mapping[str, str], projections: tuple[str, str, str]) -> _Name:
    module, _, leaf = name.rpartition(".")
    parts = [spellings.get(part, part) for part in module.split(".")]
    # A wrapper's language model (Kimi-K2.5's language_model.model., Qwen3.5's model.language_model.): its plans are
    # the text model's, whose paths start at model.
    if parts[0] == "language_model":
        parts = parts[1:]
    elif len(parts) > 1 and parts[1] == "language_model":
        parts = [parts[0], *parts[2:]]
    layer = expert = None
    if len(parts) > 2 and parts[0] == "model" and parts[1] == "layers" and parts[2].isdigit():
        layer = int(parts[2])
        parts[2] = "*"
    if "experts" in parts:
        at = parts.index("experts")
        if at + 2 < len(parts) and parts[at + 1].isdigit():
            expert = int(parts[at + 1])
            fused = "down_proj" if parts[at + 2] == projections[2] else "gate_up_proj"
            parts = [*parts[: at + 1], fused]
    return _Name(".".join(parts), layer, leaf, expert)


def _experts_key(template: str, spellings: Mapping[str, str], projections: tuple[str, str, str]) -> _Name | None:
    """What every tensor of a routed expert's template (``…experts.{expert}.gate_proj.weight``) is named as the plans
    see it, its ``expert`` aside (None); None when they may not all be alike, and each is to be read on its own.

    They are alike when ``{expert}`` is a segment of its own that no spelling renames (no spelling renames a number):
    ``_module_key`` then reads each expert's number the same way, as the expert (two numbers read as two experts and
    otherwise alike), as the layer or as part of the key (read as two names: not alike)."""
    if EXPERT not in template.split(".") or any(segment.isdigit() for segment in spellings):
        return None
    zero, one = (_module_key(template.replace(EXPERT, number), spellings, projections) for number in ("0", "1"))
    if zero.expert != 0 or one != zero._replace(expert=1):
        return None
    return zero._replace(expert=None)


class _Alike(NamedTuple):
    """Tensors of one manifest group that the plans see alike: one module pattern, leaf and layer; routed experts' or
    one tensor."""

    group: ManifestGroup
    name: _Name
    """Their name as the plans see it (``expert``: the first's)."""
    experts: Experts | None
    """Their routed experts, a tensor each, named by the group's template; None: the one tensor ``first``."""
    first: str
    """The first of their checkpoint names in the sorted manifest."""

    @property
    def tensor_count(self) -> int:
        return 1 if self.experts is None else len(self.experts)

    def numbered(self) -> Iterator[tuple[str, int | None]]:
        """Each tensor's checkpoint name and routed expert."""
        if self.experts is None:
            yield self.first, self.name.expert
        else:
            yield from zip(expert_names(self.group.tensor.name, self.experts), self.experts, strict=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Heads:
    """Attention heads of a layer kind, read off the graph's attention node."""

    heads: int
    kv_heads: int


def _attention_heads(graph: Graph) -> dict[str, _Heads]:
    """By attention group id: the query heads and the KV heads of its scaled dot-product attention."""
    found: dict[str, _Heads] = {}
    for node in graph.nodes:
        if node.op is not None and node.op.kind is OpKind.ATTENTION and len(node.inputs) >= 2:
            heads = node.inputs[0].dims[1].value or 0
            kv = node.inputs[1].dims[1].value or 0
            found[node.group] = _Heads(heads=heads, kv_heads=kv)
    return found


class _Planner:
    """Decides each tensor's rule (the plan's entry, or the engine's), once per module pattern."""

    def __init__(
        self,
        graph: Graph,
        family: Family,
        convention: Convention,
        parallelism: Parallelism,
        plans: ParallelPlans | None,
    ) -> None:
        self.graph = graph
        self.convention = convention
        self.parallelism = parallelism
        self.plans = plans
        self.tp_plan = {f"model.{key}": value for key, value in (plans.tp if plans else {}).items()}
        if self.tp_plan:  # transformers' init_parallel_plans: the input embedding vocabulary-parallel unless named
            self.tp_plan.setdefault("model.embed_tokens", "embedding_rowwise")
        self.tp_plan.update(plans.head if plans else {})
        self.ep_plan = {f"model.{key}": value for key, value in ((plans.ep if plans else None) or {}).items()}
        moe = family.speaks.moe
        self.projections = moe.projections if moe is not None else ("gate_proj", "up_proj", "down_proj")
        self.mixers = {layer.index: layer.mixer for layer in graph.layers}
        nodes = {node.id: node for node in graph.nodes}
        heads = _attention_heads(graph)
        self.node_heads = {node_id: heads.get(node.group) for node_id, node in nodes.items()}
        self.nodes = nodes
        self.described: dict[str, str] = {}
        self.encoders = frozenset(node for node, part in node_parts(graph).items() if part != "text")
        self.spellings = graph.naming.segment_renames()
        self.memo: dict[tuple[object, ...], _Rule] = {}
        self.smallest: dict[Experts, int] = {}

    def name(self, checkpoint_name: str) -> _Name:
        return _module_key(checkpoint_name, self.spellings, self.projections)

    def alike(self, group: ManifestGroup) -> Iterator[_Alike]:
        """A group's tensors parted by how the plans see them: a layer's routed experts of one row all alike when
        their template says so (``_experts_key``), else each read on its own."""
        if group.experts is None:
            yield _Alike(group, self.name(group.tensor.name), None, group.tensor.name)
            return
        shared = _experts_key(group.tensor.name, self.spellings, self.projections)
        if shared is None:
            for name in group.names():
                yield _Alike(group, self.name(name), None, name)
            return
        if group.experts not in self.smallest:  # the first name in the sorted manifest: the smallest number as text
            self.smallest[group.experts] = min(group.experts, key=str)
        smallest = self.smallest[group.experts]
        first = group.tensor.name.replace(EXPERT, str(smallest))
        yield _Alike(group, shared._replace(expert=group.experts[0]), group.experts, first)

    def in_order(self, groups: Iterable[ManifestGroup]) -> list[_Alike]:
        """The groups' tensors parted by how the plans see them (``alike``), in the order the sorted manifest meets
        them: a module pattern is described by its first tensor's rule (``rule``)."""
        found = [alike for group in groups for alike in self.alike(group)]
        found.sort(key=lambda alike: alike.first)
        return found

    def rule(self, group: ManifestGroup, name: _Name) -> _Rule:
        """The rule of a group's tensors named ``name``, decided once for each module pattern, shape, dtype and
        role."""
        mixer = self.mixers.get(name.layer) if name.layer is not None else None
        memo = (
            name.key,
            name.leaf,
            group.tensor.shape,
            group.tensor.role,
            group.tensor.node,
            name.expert is not None,
            mixer,
        )
        found = self.memo.get(memo)
        if found is None:
            found, said = self._rule(group, name, mixer)
            self.memo[memo] = found
            self.described.setdefault(name.key, said)
        return found

    def _rule(self, group: ManifestGroup, name: _Name, mixer: str | None) -> tuple[_Rule, str]:
        key, shape = name.key, group.tensor.shape
        is_bias = name.leaf == "bias" or len(shape) == 1
        expert = name.expert is not None
        ep_style = self.ep_plan.get(f"{key}.{name.leaf}") or self.ep_plan.get(key)
        if self.parallelism.ep > 1 and ep_style is not None:
            said = f"experts over {self.parallelism.ep} EP ranks ({ep_style})"
            # A checkpoint that stores each expert apart places it whole; a fused one is cut along its experts (dim 0).
            return _Rule(Split.EXPERTS, dim=None if expert else 0), said
        short = key.rsplit(".", 1)[-1]
        if self.convention is Convention.ENGINE:
            if key in ("model.embed_tokens", "lm_head") and len(shape) == 2:
                return _Rule(Split.ROWS, dim=0, pad_to=VOCAB_PADDING), "vocabulary-parallel, padded to 64 (engine)"
            if ".self_attn." in key and mixer in _SOFTMAX_MIXERS and short in _ENGINE_ATTENTION:
                return self._engine_attention(group, short, is_bias)
        style = self.tp_plan.get(f"{key}.{name.leaf}") or self.tp_plan.get(key)  # a parameter's entry, or its module's
        if style is None:
            return _Rule(Split.REPLICATE), "replicated (no plan entry)"
        split = SPLITS.get(style, Split.REPLICATE)
        if group.tensor.role == TensorRole.SHAPE or split is Split.REPLICATE:
            return _Rule(Split.REPLICATE), f"replicated ({style})"
        if split is Split.OUTPUT:
            return _Rule(Split.OUTPUT, dim=0 if is_bias else -2), style
        if split is Split.INPUT:
            if is_bias:
                return _Rule(Split.REPLICATE), style
            return _Rule(Split.INPUT, dim=-1), style
        if split is Split.ROWS:
            return _Rule(Split.ROWS, dim=0), style
        if split is Split.COLUMNS:
            return _Rule(Split.COLUMNS, dim=1), style
        return _Rule(Split.REPLICATE), f"replicated ({style})"

    def _engine_attention(self, group: ManifestGroup, short: str, is_bias: bool) -> tuple[_Rule, str]:
        split = _ENGINE_ATTENTION[short]
        heads = self.node_heads.get(group.tensor.node)
        if split is Split.REPLICATE or heads is None or heads.heads == 0:
            return _Rule(Split.REPLICATE), "replicated: MLA's latent projection (engine)"
        if split is Split.INPUT:
            if is_bias:
                return _Rule(Split.REPLICATE), "rowwise by heads (engine)"
            width = group.tensor.shape[-1] // heads.heads if group.tensor.role == TensorRole.WEIGHT else 1
            return _Rule(Split.INPUT, dim=-1, unit=max(width, 1)), "rowwise by heads (engine)"
        dim = 0 if is_bias else -2
        rows = group.tensor.shape[dim]
        if short in ("k_proj", "v_proj") and heads.kv_heads and heads.kv_heads != heads.heads:
            width = rows // heads.kv_heads
            said = "colwise by KV heads, one per rank replicated when TP exceeds them (engine)"
            return _Rule(Split.OUTPUT, dim=dim, unit=max(width, 1), kv_heads=heads.kv_heads), said
        width = rows // heads.heads
        return _Rule(Split.OUTPUT, dim=dim, unit=max(width, 1)), "colwise by heads (engine)"


def _itemsize(dtype: str) -> int:
    return ITEMSIZE[dtype]


def _tensor_bytes(tensor: ManifestTensor) -> int:
    """One stored tensor's bytes."""
    return math.prod(tensor.shape) * _itemsize(tensor.dtype)


def stages(graph: Graph, pp: int) -> list[tuple[int, ...]]:
    """The main model's decoder layers of each pipeline stage: ⌊L/pp⌋ each, the last taking the remainder."""
    layers = [layer.index for layer in graph.layers if layer.part is Part.MAIN]
    if not layers:
        layers = sorted({index for node in graph.nodes if node.part is Part.MAIN for index in node.placement.layers})
    base = len(layers) // pp
    out: list[tuple[int, ...]] = []
    for stage in range(pp):
        end = len(layers) if stage == pp - 1 else (stage + 1) * base
        out.append(tuple(layers[stage * base : end]))
    return out


def expert_owner(expert: int, experts: int, ep: int) -> int:
    """The EP rank that holds an expert: ⌊E/ep⌋ per rank, the last rank taking the remainder."""
    base = experts // ep
    return min(expert // base, ep - 1) if base else ep - 1


# -- validation -----------------------------------------------------------------------------------------------------


def check_parallelism(
    graph: Graph,
    parallelism: Parallelism,
    convention: Convention,
    plans: ParallelPlans | None = None,
    config_heads: tuple[int, int] | None = None,
) -> None:
    """``InputError`` for a plan the model cannot run: heads TP does not divide where the convention needs it, EP
    over more ranks than experts or not over a stage's ranks, more stages than layers."""
    p = parallelism
    for value, name in ((p.tp, "--tp"), (p.ep, "--ep"), (p.pp, "--pp"), (p.dp, "--dp")):
        if value < 1:
            raise InputError("must be at least 1", path=f"{name} {value}")
    experts = expert_count(graph)
    if p.ep > 1:
        if experts == 0:
            raise InputError("the model has no routed experts to place", path=f"--ep {p.ep}")
        if p.ep > experts:
            raise InputError(f"EP over more ranks than the model's {experts} experts", path=f"--ep {p.ep}")
        if p.ep != p.stage_ranks:
            raise InputError(
                f"--ep must be 1 or the ranks of a pipeline stage, tp × dp = {p.stage_ranks}", path=f"--ep {p.ep}"
            )
    main_layers = [layer for layer in graph.layers if layer.part is Part.MAIN]
    if main_layers and p.pp > len(main_layers):
        raise InputError(f"more pipeline stages than the model's {len(main_layers)} layers", path=f"--pp {p.pp}")
    if p.tp == 1:
        return
    heads = _attention_heads(graph)
    if not heads and config_heads is not None:  # a graph read off the code: the config's heads
        heads = {"": _Heads(heads=config_heads[0], kv_heads=config_heads[1])}
    plan = plans.tp if plans is not None else {}
    attention_split = any(".self_attn." in key and SPLITS.get(value) is Split.OUTPUT for key, value in plan.items())
    for found in heads.values():
        if convention is Convention.ENGINE:
            if found.heads % p.tp:
                raise InputError(
                    f"TP {p.tp} does not divide the {found.heads} attention heads (the engine convention splits by "
                    "heads)",
                    path=f"--tp {p.tp}",
                )
            if found.kv_heads and found.kv_heads != found.heads and found.kv_heads % p.tp and p.tp % found.kv_heads:
                raise InputError(
                    f"TP {p.tp} neither divides nor is a multiple of the {found.kv_heads} KV heads", path=f"--tp {p.tp}"
                )
        elif attention_split:
            for count, what in ((found.heads, "attention heads"), (found.kv_heads, "KV heads")):
                if count and count % p.tp:
                    raise InputError(
                        f"TP {p.tp} does not divide the {count} {what} (transformers' plan splits q_proj, k_proj and "
                        "v_proj by rows; --convention engine replicates KV heads)",
                        path=f"--tp {p.tp}",
                    )


def expert_count(graph: Graph) -> int:
    """Routed experts per MoE layer: the experts node's instances, or (a graph read off the code, whose experts are
    fused tensors) the first dimension of an ``experts`` module's 3-D weight; 0 for a dense model."""
    found = max(
        (
            node.placement.active_share[1] if node.placement.active_share else node.placement.per_layer
            for node in graph.nodes
            if _is_experts(node)
        ),
        default=0,
    )
    if found:
        return found
    fused = (
        row.shape[0]
        for node in graph.nodes
        for row in node.parameters
        if len(row.shape) == 3 and ".experts." in row.tensor
    )
    return max(fused, default=0)


def _is_experts(node: Node) -> bool:
    return node.op is not None and node.op.kind is OpKind.EXPERTS


# -- the plan ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """What the user asks."""

    gpu: Gpu
    """The GPU every rank is."""
    parallelism: Parallelism
    """How the GPUs are arranged."""
    convention: Convention = Convention.TRANSFORMERS
    """How attention and the embedding are split."""
    context: int = 131_072
    """Cached positions per sequence (``S``)."""
    prompt: int = 2048
    """Tokens of the prompt the prefill bound is for (``T``)."""
    batch: int | None = None
    """Sequences per replica for the roofline; None: the sequences that fit (at least 1)."""
    cache_dtype: str | None = None
    """The cache's dtype as safetensors names it; None: the checkpoint's."""
    compute: str | None = None
    """The throughput the bounds use (``bf16``, ``fp8``, ``fp4``); None: FP8 for a checkpoint mostly in FP8, else
    BF16."""
    reserve: float = DEFAULT_RESERVE
    """The share of each GPU's memory kept back."""
    plans: ParallelPlans | None = None
    """transformers' plans as read off its classes (a model_type without a hand-written family); None: the
    restatement for a hand-written family's model_type."""
    config_heads: tuple[int, int] | None = None
    """The config's attention and KV heads, for a graph read off the code (its attention carries no head dimension);
    None: the heads of the graph's attention."""

    def chosen_plans(self, graph: Graph, family: Family) -> ParallelPlans | None:
        """The plans given, else the restatement for the graph's family, else None (everything replicated)."""
        return self.plans or restated_plans(graph, family)


@dataclass(slots=True)
class _Held:
    """A rank's tensors, added up."""

    bytes: int = 0
    by_split: Counter[str] = field(default_factory=Counter)
    node_elements: Counter[str] = field(default_factory=Counter)
    expert_bytes: Counter[int] = field(default_factory=Counter)
    """Routed-expert bytes by layer."""
    experts: Counter[int] = field(default_factory=Counter)
    """Routed experts (whole or sliced) by layer."""
    embedding_bytes: int = 0
    embedding_rows: int = 0


_FIRST, _LAST = -1, 1 << 40
MAX_RANK_GROUPS = 1_000_000
"""Groups of tensors times a stage's ranks (``tp × dp``) a plan adds up: each pair is a local shape worked out, a few
microseconds; Kimi-K2's 1,463 groups on 512 ranks are 749,056."""
"""Where a model-level tensor sits among the layers: the embedding before them all, the final norm and head after."""


def _position(layer: int | None, node: Node, graph: Graph, encoders: frozenset[str] = frozenset()) -> int:
    """Where a tensor sits: its decoder layer; an image encoder's (numbered by its own blocks) and the embedding
    before the first layer; the final norm and the head after the last."""
    if node.id in encoders:
        return _FIRST
    if layer is not None:
        return layer
    if node.placement.layers:
        return node.placement.layers[0]
    return _FIRST if node.id == graph.input_embedding else _LAST


def _stage_at(position: int, layer_stage: Mapping[int, int], pp: int) -> int:
    if position == _FIRST:
        return 0
    return layer_stage.get(position, pp - 1)


def local_experts(experts: int, ep: int, ep_rank: int) -> int:
    """Routed experts of a layer an EP rank holds: ⌊E/ep⌋, the last rank the remainder."""
    if ep == 1:
        return experts
    base = experts // ep
    return experts - base * (ep - 1) if ep_rank == ep - 1 else base


_Group = tuple[int, str, tuple[int, ...], str, _Rule, int | None, bool]
"""Tensors added up together: position, node, shape, dtype, rule, EP owner, whether a routed expert's."""


def _split_tensors(graph: Graph, planner: _Planner, p: Parallelism) -> tuple[Counter[_Group], int, int, dict[str, int]]:
    """Every tensor of the predicted checkpoint with its rule, added up by what decides its share (a 1 T MoE has
    ~140,000 tensors, taken a layer's routed experts of one row at a time); the main model's and the MTP layers'
    bytes; the main model's bytes by split."""
    experts = max((node.placement.per_layer for node in graph.nodes if _is_experts(node)), default=0)
    groups: Counter[_Group] = Counter()
    by_split: Counter[str] = Counter()
    owners: dict[Experts, Counter[int | None]] = {}
    mtp_bytes = weight_total = 0
    main: list[ManifestGroup] = []
    for group in manifest_groups(graph):
        size = _tensor_bytes(group.tensor) * group.tensor_count
        if group.tensor.part is Part.MTP:
            mtp_bytes += size
        else:
            weight_total += size
            main.append(group)
    for alike in planner.in_order(main):
        tensor, name = alike.group.tensor, alike.name
        node = planner.nodes[tensor.node]
        rule = planner.rule(alike.group, name)
        is_expert = _is_experts(node) and name.expert is not None
        by_split[rule.split.value] += _tensor_bytes(tensor) * alike.tensor_count
        position = _position(name.layer, node, graph, planner.encoders)
        for owner, count in _owners(alike, rule, experts, p.ep, owners).items():
            groups[(position, tensor.node, tensor.shape, tensor.dtype, rule, owner, is_expert)] += count
    return groups, weight_total, mtp_bytes, dict(sorted(by_split.items()))


def _owners(
    alike: _Alike, rule: _Rule, experts: int, ep: int, memo: dict[Experts, Counter[int | None]]
) -> Counter[int | None]:
    """How many of the tensors each EP rank holds (None: each rank its share of every one); ``memo``: the counts
    for each set of routed experts met before (every layer's are alike)."""
    if rule.split is not Split.EXPERTS or alike.name.expert is None:
        return Counter({None: alike.tensor_count})
    if alike.experts is None:
        return Counter({expert_owner(alike.name.expert, experts, ep): 1})
    if alike.experts not in memo:
        memo[alike.experts] = Counter(expert_owner(expert, experts, ep) for expert in alike.experts)
    return memo[alike.experts]


def _hold(
    graph: Graph, groups: Counter[_Group], p: Parallelism, layer_stage: Mapping[int, int]
) -> dict[tuple[int, int], _Held]:
    """Each rank's tensors, added up, by (stage, rank in the stage)."""
    experts = max((node.placement.per_layer for node in graph.nodes if _is_experts(node)), default=0)
    held: dict[tuple[int, int], _Held] = defaultdict(_Held)
    moe_layers: set[tuple[int, int]] = set()
    for (position, node_id, shape, dtype, rule, owner, is_expert), count in groups.items():
        stage = _stage_at(position, layer_stage, p.pp)
        if is_expert:
            moe_layers.add((stage, position))
        for index in range(p.stage_ranks):
            ep_rank = index if p.ep > 1 else 0
            if owner is not None and owner != ep_rank:
                continue
            local = _local_shape(shape, rule, p.tp, index, p.ep)
            elements = math.prod(local) * count
            size = elements * _itemsize(dtype)
            rank = held[(stage, index)]
            rank.bytes += size
            rank.by_split[rule.split.value] += size
            rank.node_elements[node_id] += elements
            if is_expert:
                rank.expert_bytes[position] += size
            if node_id == graph.input_embedding:
                rank.embedding_bytes += size
                rank.embedding_rows += local[0] * count if local else 0
    for stage, layer in moe_layers:
        for index in range(p.stage_ranks):
            held[(stage, index)].experts[layer] = local_experts(experts, p.ep, index if p.ep > 1 else 0)
    return held


def _fewest_stages(graph: Graph, groups: Counter[_Group], p: Parallelism, usable: int) -> Parallelism | None:
    """The fewest pipeline stages past ``p.pp`` (same TP, EP and DP) with every rank's weights within ``usable``.

    Each rank's bytes are added up once per layer; a stage count then costs one sum per stage and rank (prefix
    sums), not a pass over every tensor group: trying every count of a 10,000-layer model took minutes that way.
    """
    import numpy as np  # only when a plan does not fit

    layers = stages(graph, 1)[0]
    row_of = {layer: row for row, layer in enumerate(layers)}
    ranks = p.stage_ranks
    rows = [[0] * ranks for _ in range(len(layers) + 2)]  # each layer's, then the first stage's and the last's extras
    first, last = len(layers), len(layers) + 1
    for (position, _node, shape, dtype, rule, owner, _expert), count in groups.items():
        row = rows[first if position == _FIRST else row_of.get(position, last)]
        for index in range(ranks):
            if owner is not None and owner != (index if p.ep > 1 else 0):
                continue
            row[index] += math.prod(_local_shape(shape, rule, p.tp, index, p.ep)) * count * _itemsize(dtype)
    everything = sum(sum(row) for row in rows)
    kind: type = np.int64 if everything < 2**62 else object  # exact either way
    held: Any = np.array(rows, dtype=kind).reshape(len(rows), ranks)
    prefix = np.concatenate([np.zeros((1, ranks), dtype=kind), np.cumsum(held[: len(layers)], axis=0, dtype=kind)])
    for pp in range(p.pp + 1, len(layers) + 1):
        base = len(layers) // pp  # as `stages` splits: ⌊L/pp⌋ each, the last the remainder
        starts = np.arange(pp) * base
        ends = np.append(starts[1:], len(layers))
        per_stage = prefix[ends] - prefix[starts]
        per_stage[0] += held[first]
        per_stage[-1] += held[last]
        if per_stage.max() <= usable:
            return Parallelism(tp=p.tp, ep=p.ep, pp=pp, dp=p.dp)
    return None


def plan_deployment(graph: Graph, family: Family, request: PlanRequest) -> Plan:
    """Split the predicted checkpoint (of ``graph``, which ``family`` built) over the ranks, add up each rank's
    weights, cache, reads and FLOPs.

    ``InputError`` when a rank's weights do not fit beside the reserve: the message says how many GPUs of the kind
    the same TP and DP need, with pipeline stages added until every rank's share fits.
    """
    p, convention = request.parallelism, request.convention
    plans = request.chosen_plans(graph, family)
    check_parallelism(graph, p, convention, plans, request.config_heads)
    planner = _Planner(graph, family, convention, p, plans)
    layer_lists = stages(graph, p.pp)
    layer_stage = {layer: stage for stage, layers in enumerate(layer_lists) for layer in layers}
    groups, weight_total, mtp_bytes, by_split = _split_tensors(graph, planner, p)
    if len(groups) * p.stage_ranks > MAX_RANK_GROUPS:
        raise InputError(
            f"the plan adds up {len(groups):,} groups of tensors on each of a stage's {p.stage_ranks:,} ranks "
            f"(tp × dp), more than archviz adds up ({MAX_RANK_GROUPS:,} in all)",
            path=_plan_path(request),
        )
    held = _hold(graph, groups, p, layer_stage)
    usable = int(request.gpu.memory * (1 - request.reserve))
    largest = max((rank.bytes for rank in held.values()), default=0)
    if largest > usable:
        raise InputError(_needs(graph, groups, request, weight_total, largest, usable), path=_plan_path(request))
    plan = _finish(graph, request, planner, layer_lists, held, weight_total, mtp_bytes)
    _ = plan.throughput  # a GPU without the throughput asked for is refused here, not when the plan is shown
    return replace(plan, checkpoint_bytes_by_split=by_split)


def _plan_path(request: PlanRequest) -> str:
    p = request.parallelism
    return f"--gpu {request.gpu.key} --gpus {p.gpus} --tp {p.tp} --ep {p.ep} --pp {p.pp} --dp {p.dp}"


def _needs(
    graph: Graph, groups: Counter[_Group], request: PlanRequest, weight_total: int, largest: int, usable: int
) -> str:
    """The "needs at least N GPUs of this kind" message: N from the weights over one GPU's usable memory, and the
    pipeline stages that, added to the same TP and DP, make every rank's share fit."""
    p = request.parallelism
    needed = _fewest_stages(graph, groups, p, usable)
    lower = max(-(-weight_total // usable), p.gpus + 1)
    fits = (
        f"; with tp {p.tp} and dp {p.dp}, pp {needed.pp} ({needed.gpus} GPUs) fits"
        if needed is not None
        else f"; no number of pipeline stages with tp {p.tp} and dp {p.dp} fits"
    )
    return (
        f"needs at least {lower} GPUs of this kind: the weights are {weight_total / GIB:,.1f} GiB and one rank of this "
        f"plan holds {largest / GIB:,.1f} GiB, more than the {usable / GIB:,.1f} GiB one GPU ({request.gpu.title}) "
        f"leaves after a {request.reserve:.0%} reserve{fits}"
    )


def local_shapes(
    graph: Graph, family: Family, request: PlanRequest, index: int, stage: int = 0
) -> dict[str, tuple[int, ...]]:
    """Every checkpoint tensor's shape on rank ``index`` of ``stage`` (empty shapes left out: a tensor the rank does
    not hold is absent), for a witness to compare tensor by tensor."""
    p = request.parallelism
    plans = request.chosen_plans(graph, family)
    check_parallelism(graph, p, request.convention, plans, request.config_heads)
    planner = _Planner(graph, family, request.convention, p, plans)
    layer_stage = {layer: at for at, layers in enumerate(stages(graph, p.pp)) for layer in layers}
    experts = max((node.placement.per_layer for node in graph.nodes if _is_experts(node)), default=0)
    found: dict[str, tuple[int, ...]] = {}
    for alike in planner.in_order(group for group in manifest_groups(graph) if group.tensor.part is not Part.MTP):
        name = alike.name
        position = _position(name.layer, planner.nodes[alike.group.tensor.node], graph, planner.encoders)
        if _stage_at(position, layer_stage, p.pp) != stage:
            continue
        rule = planner.rule(alike.group, name)
        shape = _local_shape(alike.group.tensor.shape, rule, p.tp, index, p.ep)
        for tensor, expert in alike.numbered():
            if rule.split is Split.EXPERTS and expert is not None and expert_owner(expert, experts, p.ep) != index:
                continue
            found[tensor] = shape
    return dict(sorted(found.items()))


def _compute_dtype(graph: Graph, request: PlanRequest) -> str:
    if request.compute is not None:
        return request.compute
    weights: Counter[str] = Counter()
    for node in graph.nodes:
        for row in node.parameters:
            weights[row.dtype] += row.elements * node.placement.count
    top = weights.most_common(1)[0][0] if weights else "BF16"
    return "fp8" if top.startswith("F8") else "bf16"


def _finish(
    graph: Graph,
    request: PlanRequest,
    planner: _Planner,
    layer_lists: Sequence[tuple[int, ...]],
    held: Mapping[tuple[int, int], _Held],
    weight_total: int,
    mtp_bytes: int,
) -> Plan:
    p = request.parallelism
    # A graph read off the code is priced by ``archviz cost``, but the plan's per-rank split of fused expert banks
    # (one [E, …] tensor per layer) is not written yet: its plan gives memory, not time or cache.
    priced = cost_priced(graph) and not graph.derived_from_code
    dtype = request.cache_dtype or graph.dtype
    costs = cache_costs(graph, dtype) if priced else []
    usable = int(request.gpu.memory * (1 - request.reserve))
    heads = _attention_heads(graph)
    node_group = {node.id: node.group for node in graph.nodes}
    kv_split = _kv_split(planner, request.convention)
    base_costs = node_costs(graph) if priced else {}
    if request.convention is Convention.ENGINE:  # engines decode MLA absorbed
        base_costs = absorbed_costs(graph, base_costs) or base_costs
    ranks = _rank_list(graph, request, layer_lists, held, costs, heads, node_group, kv_split, base_costs, usable)
    counts = [rank.sequences for rank in ranks if rank.sequences is not None]
    sequences = min(counts) if counts else None  # None: not priced, or no cache to bound them
    batch = request.batch if request.batch is not None else max(sequences or 1, 1)
    if priced and batch:
        ranks = _rank_list(
            graph, request, layer_lists, held, costs, heads, node_group, kv_split, base_costs, usable, batch=batch
        )
    notes = list(_notes(graph, request, planner, priced))
    if priced and not counts:
        notes.insert(0, "The modelled layers keep no cache or state: no number of sequences is bounded by it.")
    if not modelled_in_full(graph):
        notes.insert(
            0,
            "Only part of this model is modelled: the weights, cache and bounds are of the modelled part alone.",
        )
    if priced and sequences == 0 and request.batch is None:
        notes.insert(
            0,
            f"No sequence of {request.context:,} positions fits beside the weights: the bounds are at batch 1, which "
            "would not fit (a shorter --context, a smaller --reserve or more GPUs).",
        )
    return Plan(
        gpu=request.gpu,
        parallelism=p,
        convention=request.convention,
        context=request.context,
        prompt=request.prompt,
        batch=batch,
        cache_dtype=dtype,
        compute=_compute_dtype(graph, request),
        reserve=request.reserve,
        ranks=tuple(ranks),
        weight_bytes=weight_total,
        mtp_bytes=mtp_bytes,
        priced=priced,
        notes=tuple(notes),
        splits=dict(sorted(planner.described.items())),
    )


def sequences_at(plan: Plan, memory: int, context: int) -> int | None:
    """Sequences of ``context`` positions the plan's GPUs hold beside the weights on GPUs of ``memory`` bytes (the
    plan's reserve kept back): the tightest rank's count, × dp; 0 when a rank's weights alone do not fit; None when
    the model keeps no cache or is not priced."""
    usable = int(memory * (1 - plan.reserve))
    counts = []
    for rank in plan.ranks:
        per_sequence = cache_bytes_at(rank.cache, context)
        if rank.weight_bytes > usable:
            return 0
        if per_sequence:
            counts.append((usable - rank.weight_bytes) // per_sequence)
    return min(counts) * plan.parallelism.dp if counts else None


def _kv_split(planner: _Planner, convention: Convention) -> bool:
    """Whether a softmax-attention layer's keys and values are split over TP ranks (transformers' plan cuts
    ``k_proj``; the engine convention always does)."""
    if convention is Convention.ENGINE:
        return True
    return SPLITS.get(planner.tp_plan.get("model.layers.*.self_attn.k_proj", ""), Split.REPLICATE) is Split.OUTPUT


def _rank_cache(
    costs: Sequence[CacheCost],
    layers: tuple[int, ...],
    mixers: Mapping[int, str],
    heads: Mapping[str, _Heads],
    kv_split: bool,
    tp: int,
    tp_index: int,
) -> list[CacheCost]:
    """The cache entries of a stage's layers, each scaled to the KV heads the rank keeps."""
    on = set(layers)
    kv = next((found.kv_heads for found in heads.values() if found.kv_heads != 1 and found.kv_heads), 0)
    out: list[CacheCost] = []
    for cost in costs:
        if cost.layer is not None and cost.layer not in on:
            continue
        mixer = mixers.get(cost.layer) if cost.layer is not None else None
        if mixer in (Mixer.ATTENTION, Mixer.SLIDING_WINDOW) and kv_split and kv and tp > 1:
            local = 1 if tp >= kv else chunk(kv, tp, tp_index)
            out.append(
                CacheCost(
                    node=cost.node,
                    layer=cost.layer,
                    layer_type=cost.layer_type,
                    per_token=cost.per_token * local // kv,
                    state=cost.state * local // kv,
                    window=cost.window,
                    windowed_per_token=cost.windowed_per_token * local // kv,
                )
            )
        else:
            out.append(cost)
    return out


def _rank_list(
    graph: Graph,
    request: PlanRequest,
    layer_lists: Sequence[tuple[int, ...]],
    held: Mapping[tuple[int, int], _Held],
    costs: Sequence[CacheCost],
    heads: Mapping[str, _Heads],
    node_group: Mapping[str, str],
    kv_split: bool,
    base_costs: Mapping[str, NodeCost],
    usable: int,
    *,
    batch: int | None = None,
) -> list[Rank]:
    """Every rank's figures; the decode and prefill ones only with a ``batch`` (known once the sequences that fit
    are)."""
    p = request.parallelism
    priced = not graph.derived_from_code
    mixers = {layer.index: layer.mixer for layer in graph.layers}
    nodes = {node.id: node for node in graph.nodes}
    whole = {node.id: sum(row.elements for row in node.parameters) for node in graph.nodes}
    ranks: list[Rank] = []
    for stage, layers in enumerate(layer_lists):
        for index in range(p.stage_ranks):
            rank_held = held.get((stage, index), _Held())
            tp_index = index % p.tp
            free = usable - rank_held.bytes
            per_token = state = per_sequence = sequences = None
            local: list[CacheCost] = []
            decode_bytes = decode_flops = prefill_flops = None
            if priced:
                local = _rank_cache(costs, layers, mixers, heads, kv_split, p.tp, tp_index)
                per_token = sum(cost.per_token for cost in local)
                state = sum(cost.state for cost in local)
                per_sequence = cache_bytes_at(local, request.context)
                sequences = max(free, 0) // per_sequence if per_sequence else None
                if batch is not None:
                    decode_bytes = _decode_bytes(graph, rank_held, batch) + batch * per_sequence
                    share = _node_shares(graph, rank_held, whole, nodes, node_group, layers, stage, p.pp)
                    decode_flops = prefill_flops = 0
                    sizes = Sizes(batch=batch, prompt=request.prompt, context=request.context)
                    one = Sizes(batch=1, prompt=request.prompt, context=request.context)
                    for node_id, cost in base_costs.items():
                        fraction = share.get(node_id)
                        if fraction is None:
                            continue
                        decode_flops += int(_stage_flops(cost, sizes, Phase.DECODE, layers) * fraction)
                        prefill_flops += int(_stage_flops(cost, one, Phase.PREFILL, layers) * fraction)
            ranks.append(
                Rank(
                    stage=stage,
                    index=index,
                    layers=layers,
                    weight_bytes=rank_held.bytes,
                    weight_bytes_by_split=dict(sorted(rank_held.by_split.items())),
                    experts=max(rank_held.experts.values(), default=0),
                    cache_per_token=per_token,
                    state_per_sequence=state,
                    cache_per_sequence=per_sequence,
                    free_bytes=free,
                    sequences=sequences,
                    decode_bytes=decode_bytes,
                    decode_flops=decode_flops,
                    prefill_flops=prefill_flops,
                    cache=tuple(local) if priced else (),
                )
            )
    return ranks


def _stage_flops(cost: NodeCost, sizes: Sizes, phase: Phase, layers: tuple[int, ...]) -> int:
    """A node's FLOPs in a stage's layers; a model-level node's whole (its share is 0 on stages that do not hold
    it)."""
    on = set(layers)
    total = 0
    for term in cost.terms(phase):
        if term.layers:
            total += term.per_instance(sizes, phase) * sum(1 for layer in term.layers if layer in on)
        else:
            total += term.per_instance(sizes, phase)
    return total


def _node_shares(
    graph: Graph,
    rank_held: _Held,
    whole: Mapping[str, int],
    nodes: Mapping[str, Node],
    node_group: Mapping[str, str],
    layers: tuple[int, ...],
    stage: int,
    pp: int,
) -> dict[str, float]:
    """Each node's share of its FLOPs this rank computes: its share of the node's weights on the stage (a node without
    weights, attention's core: the smallest share of its group's weighted nodes, which follow the heads)."""
    on = set(layers)
    shares: dict[str, float] = {}
    for node in graph.nodes:
        if not node.parameters and node.shares_parameters_with is None:
            continue
        source = node.shares_parameters_with or node.id
        elements = whole[source] * _instances_on(nodes[source], on, stage, pp, graph)
        if elements:
            shares[node.id] = rank_held.node_elements.get(source, 0) / elements
    by_group: dict[str, float] = {}
    for node_id, value in shares.items():
        group = node_group[node_id]
        by_group[group] = min(by_group.get(group, 1.0), value)
    for node in graph.nodes:
        if node.id not in shares and node.op is not None:
            if node.placement.layers and not on.intersection(node.placement.layers):
                continue
            shares[node.id] = by_group.get(node.group, 1.0)
    return shares


def _instances_on(node: Node, on: set[int], stage: int, pp: int, graph: Graph) -> int:
    if node.placement.layers:
        return sum(1 for layer in node.placement.layers if layer in on) * node.placement.per_layer
    holder = 0 if node.id == graph.input_embedding else pp - 1
    return 1 if stage == holder else 0


def _decode_bytes(graph: Graph, rank_held: _Held, batch: int) -> int:
    """Weight bytes a decode step of ``batch`` sequences reads on a rank: every weight but the routed experts and the
    embedding; of a layer's experts on the rank at most ``batch × top-k``; one embedding row per sequence."""
    top_k = max((node.placement.active_per_layer for node in graph.nodes if _is_experts(node)), default=0)
    total = rank_held.bytes - sum(rank_held.expert_bytes.values()) - rank_held.embedding_bytes
    for layer, size in rank_held.expert_bytes.items():
        count = rank_held.experts.get(layer, 0)
        if count:
            total += size * min(count, batch * top_k) // count
    if rank_held.embedding_rows:
        total += rank_held.embedding_bytes * min(batch, rank_held.embedding_rows) // rank_held.embedding_rows
    return total


def _notes(graph: Graph, request: PlanRequest, planner: _Planner, priced: bool) -> list[str]:
    notes = []
    if request.convention is Convention.TRANSFORMERS:
        notes.append(
            "Convention transformers: the config class's base_model_tp_plan and base_model_ep_plan and the causal LM's "
            "_tp_plan, as transformers ships them; a module no entry names is replicated on every rank."
        )
    else:
        notes.append(
            "Convention engine (vLLM, SGLang): attention split by heads, KV heads replicated when TP exceeds them, "
            "MLA's latent projections and latent cache replicated, embedding and head vocabulary-parallel (padded to "
            "a multiple of 64); MLPs, experts and KDA as transformers' plans."
        )
    if planner.plans is None:
        notes.append(
            f"No tensor-parallel plan is known for {graph.model.transformers_model_type}: every tensor is replicated."
        )
    else:
        notes.append(f"Plans: {planner.plans.source}.")
    if any(layer.mixer == Mixer.MLA for layer in graph.layers):
        if request.convention is Convention.ENGINE:
            notes.append(f"MLA's latent cache is whole on every TP rank. Decode FLOPs: {ABSORBED}.")
        else:
            notes.append(
                "MLA's latent cache is whole on every TP rank. Decode FLOPs are transformers' eager count (it "
                "re-expands every cached latent through kv_b_proj at each step); --convention engine prices MLA "
                "absorbed, as engines run it. The bytes bound does not depend on it."
            )
    if any(layer.mixer == Mixer.KDA for layer in graph.layers):
        notes.append("KDA layers: no plan entry names their projections, so their weights and state are replicated.")
    if not priced:
        notes.append("The cost model does not price this graph (read off the code): cache, FLOPs and bounds unknown.")
    notes.append(
        "Bounds are lower bounds, never latencies: decode reads each rank's weights (routed experts: at most "
        "batch × top-k per layer) and the batch's cache at the context at the HBM bandwidth; prefill runs one prompt's "
        "FLOPs at the dense throughput; stages in turn; communication, kernels' efficiency and overlap not counted."
    )
    return notes
