"""Splitting the predicted checkpoint over ranks: how the GPUs are arranged, each tensor's rule (the plan's entry, or
the engine's), what a rank holds of it, and each rank's tensors added up.

Weights are split tensor by tensor from the predicted checkpoint. The split follows the model's own tensor-parallel
and expert-parallel plans as transformers ships them (``base_model_tp_plan``, ``base_model_ep_plan`` of the config
class, and the causal LM's ``_tp_plan`` for ``lm_head``), restated for a hand-written family in its folder's
``plans.py`` (``Family.plans``; a test holds each restatement to transformers' attribute); a plan entry's style name
decides the split
(``SPLITS``). Two conventions:

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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from archviz.cost.experts import model_experts, routed_experts
from archviz.cost.parallel_plans import (
    ENGINE_ATTENTION,
    ENGINE_MLP,
    SOFTMAX_MIXERS,
    SPLITS,
    VOCAB_PADDING,
    Convention,
    ParallelPlans,
    Split,
)
from archviz.cost.tensor_names import Alike
from archviz.cost.weights import itemsize, tied_tables
from archviz.graph.naming import EXPERT, NamingMap, PlanName
from archviz.graph.nodes import Graph, Node, OpKind, Part
from archviz.graph.totals import Experts, ManifestGroup, ManifestTensor, TensorRole, manifest_groups, node_parts

if TYPE_CHECKING:
    from archviz.families.registry import Family


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
    redundant: int = 0
    """Redundant copies of routed experts in each MoE layer under EP (DeepSeek's EPLB): the EP ranks hold ``E + R``
    experts between them, the first ``R`` experts twice (which ones does not change any rank's bytes)."""

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def stage_ranks(self) -> int:
        """Ranks of one pipeline stage (``tp × dp``)."""
        return self.tp * self.dp


# -- splitting a tensor ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
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


def local_shape(
    shape: tuple[int, ...], rule: Rule, tp: int, index: int, ep: int = 1, redundant: int = 0
) -> tuple[int, ...]:
    """What rank ``index`` holds of a tensor (its TP rank ``index mod tp``; under EP its EP rank ``index``, a fused
    bank of experts cut into the rank's share of its ``E + redundant`` experts)."""
    if rule.split is Split.EXPERTS and rule.dim == 0 and shape:
        return (local_experts(shape[0] + redundant, ep, index), *shape[1:])
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Heads:
    """Attention heads of a layer kind, read off the graph's attention node."""

    heads: int
    kv_heads: int


def attention_heads(graph: Graph) -> dict[str, Heads]:
    """By attention group id: the query heads and the KV heads of its scaled dot-product attention."""
    found: dict[str, Heads] = {}
    for node in graph.nodes:
        if node.op is not None and node.op.kind is OpKind.ATTENTION and len(node.inputs) >= 2:
            heads = node.inputs[0].dims[1].value or 0
            kv = node.inputs[1].dims[1].value or 0
            found[node.group] = Heads(heads=heads, kv_heads=kv)
    return found


class Planner:
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
        heads = attention_heads(graph)
        self.node_heads = {node_id: heads.get(node.group) for node_id, node in nodes.items()}
        self.nodes = nodes
        self.described: dict[str, str] = {}
        self.encoders = frozenset(node for node, part in node_parts(graph).items() if part != "text")
        self.naming: NamingMap = graph.naming
        self.memo: dict[tuple[object, ...], Rule] = {}
        self.smallest: dict[Experts, int] = {}
        self.hidden = embedding_table(graph)[1]

    def name(self, checkpoint_name: str) -> PlanName:
        return self.naming.plan_name(checkpoint_name, self.projections)

    def alike(self, group: ManifestGroup) -> Iterator[Alike]:
        """A group's tensors parted by how the plans see them: a layer's routed experts of one row all alike when
        their template says so (``NamingMap.experts_plan_name``), else each read on its own."""
        if group.experts is None:
            yield Alike(group, self.name(group.tensor.name), None, group.tensor.name)
            return
        shared = self.naming.experts_plan_name(group.tensor.name, self.projections)
        if shared is None:
            for name in group.names():
                yield Alike(group, self.name(name), None, name)
            return
        if group.experts not in self.smallest:  # the first name in the sorted manifest: the smallest number as text
            self.smallest[group.experts] = min(group.experts, key=str)
        smallest = self.smallest[group.experts]
        first = group.tensor.name.replace(EXPERT, str(smallest))
        yield Alike(group, shared._replace(expert=group.experts[0]), group.experts, first)

    def in_order(self, groups: Iterable[ManifestGroup]) -> list[Alike]:
        """The groups' tensors parted by how the plans see them (``alike``), in the order the sorted manifest meets
        them: a module pattern is described by its first tensor's rule (``rule``)."""
        found = [alike for group in groups for alike in self.alike(group)]
        found.sort(key=lambda alike: alike.first)
        return found

    def rule(self, group: ManifestGroup, name: PlanName) -> Rule:
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

    def _rule(self, group: ManifestGroup, name: PlanName, mixer: str | None) -> tuple[Rule, str]:
        key, shape = name.key, group.tensor.shape
        is_bias = name.leaf == "bias" or len(shape) == 1
        expert = name.expert is not None
        ep_style = self.ep_plan.get(f"{key}.{name.leaf}") or self.ep_plan.get(key)
        if self.parallelism.ep > 1 and ep_style is not None:
            said = f"experts over {self.parallelism.ep} EP ranks ({ep_style})"
            # A checkpoint that stores each expert apart places it whole; a fused one is cut along its experts (dim 0).
            return Rule(Split.EXPERTS, dim=None if expert else 0), said
        short = key.rsplit(".", 1)[-1]
        if self.convention is Convention.ENGINE:
            if key in ("model.embed_tokens", "lm_head") and len(shape) == 2:
                return Rule(Split.ROWS, dim=0, pad_to=VOCAB_PADDING), "vocabulary-parallel, padded to 64 (engine)"
            # a graph read off the code names its layers' mixers its own way: its attention is where heads were read
            read_heads = self.node_heads.get(group.tensor.node) is not None
            softmax = mixer in SOFTMAX_MIXERS or (self.graph.derived_from_code and read_heads)
            if ".self_attn." in key and softmax and short in ENGINE_ATTENTION:
                return self._engine_attention(group, short, is_bias)
            if key.endswith(".self_attn") and name.leaf == "sinks" and softmax and len(shape) == 1:
                return Rule(Split.OUTPUT, dim=0), "attention sinks by heads (engine)"  # one a head (gpt-oss)
        style = self.tp_plan.get(f"{key}.{name.leaf}") or self.tp_plan.get(key)  # a parameter's entry, or its module's
        if style is None and self.convention is Convention.ENGINE and name.layer is not None:
            found = self._engine_mlp(group, name)
            if found is not None:
                return found
        if style is None:
            return Rule(Split.REPLICATE), "replicated (no plan entry)"
        split = SPLITS.get(style, Split.REPLICATE)
        if group.tensor.role == TensorRole.SHAPE or split is Split.REPLICATE:
            return Rule(Split.REPLICATE), f"replicated ({style})"
        if split is Split.OUTPUT:
            return Rule(Split.OUTPUT, dim=0 if is_bias else -2), style
        if split is Split.INPUT:
            if is_bias:
                return Rule(Split.REPLICATE), style
            return Rule(Split.INPUT, dim=-1), style
        if split is Split.ROWS:
            return Rule(Split.ROWS, dim=0), style
        if split is Split.COLUMNS:
            return Rule(Split.COLUMNS, dim=1), style
        return Rule(Split.REPLICATE), f"replicated ({style})"

    def _engine_attention(self, group: ManifestGroup, short: str, is_bias: bool) -> tuple[Rule, str]:
        split = ENGINE_ATTENTION[short]
        heads = self.node_heads.get(group.tensor.node)
        if split is Split.REPLICATE or heads is None or heads.heads == 0:
            return Rule(Split.REPLICATE), "replicated: MLA's latent projection (engine)"
        if split is Split.INPUT:
            if is_bias:
                return Rule(Split.REPLICATE), "rowwise by heads (engine)"
            width = group.tensor.shape[-1] // heads.heads if group.tensor.role == TensorRole.WEIGHT else 1
            return Rule(Split.INPUT, dim=-1, unit=max(width, 1)), "rowwise by heads (engine)"
        dim = 0 if is_bias else -2
        rows = group.tensor.shape[dim]
        if short in ("k_proj", "v_proj") and heads.kv_heads and heads.kv_heads != heads.heads:
            width = rows // heads.kv_heads
            said = "colwise by KV heads, one per rank replicated when TP exceeds them (engine)"
            return Rule(Split.OUTPUT, dim=dim, unit=max(width, 1), kv_heads=heads.kv_heads), said
        width = rows // heads.heads
        return Rule(Split.OUTPUT, dim=dim, unit=max(width, 1)), "colwise by heads (engine)"

    def _engine_mlp(self, group: ManifestGroup, name: PlanName) -> tuple[Rule, str] | None:
        """An MLP's or a fused expert bank's projection no plan entry names, cut along its intermediate dimension as
        engines cut it (``ENGINE_MLP``); None for another tensor. The intermediate dimension is the one of the
        weight's two that is not the model's width (a bank stored transposed, ``[E, in, out]``, is cut all the same);
        where both are, the output of gate and up and the input of down. MXFP4's ``*_blocks`` keep their bytes of
        one block in a last dimension of their own."""
        leaf = name.leaf
        for suffix in ("_blocks", "_scales", "_bias", "_weight", "_scale"):
            leaf = leaf.removesuffix(suffix)
        short = name.key.rsplit(".", 1)[-1]
        split = ENGINE_MLP.get(leaf) or ENGINE_MLP.get(short)
        if split is None or group.tensor.role == TensorRole.SHAPE:
            return None
        shape = group.tensor.shape
        bank = routed_experts(self.nodes[group.tensor.node]) is not None and name.expert is None
        matrix = shape[1:] if bank else shape
        if name.leaf.endswith("_blocks"):
            matrix = matrix[:-1]
        said = "cut along the intermediate dimension: gate and up colwise, down rowwise, its bias whole (engine)"
        last = (1 if bank else 0) + len(matrix) - 1  # where the weight's last dimension is in the stored shape
        if len(matrix) == 1:  # a bias (or a per-row scale): cut with gate's and up's outputs, whole beside down's
            if split is Split.OUTPUT and matrix[0] != self.hidden:
                return Rule(Split.OUTPUT, dim=last - len(shape)), said
            return Rule(Split.REPLICATE), said
        rows, columns = matrix[-2], matrix[-1]
        if rows != self.hidden and columns == self.hidden:
            dim = last - 1
        elif columns != self.hidden and rows == self.hidden:
            dim = last
        else:
            dim = last - 1 if split is Split.OUTPUT else last
        return Rule(split, dim=dim - len(shape)), said


def embedding_table(graph: Graph) -> tuple[int, int]:
    """The vocabulary and the hidden size, read off the input embedding's table (0, 0 for a graph without one)."""
    node = next((node for node in graph.nodes if node.id == graph.input_embedding), None)
    if node is None or not node.parameters or len(node.parameters[0].shape) != 2:
        return 0, 0
    rows, width = node.parameters[0].shape
    return rows, width


def tensor_bytes(tensor: ManifestTensor) -> int:
    """One stored tensor's bytes."""
    return math.prod(tensor.shape) * itemsize(tensor.dtype)


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


def local_experts(experts: int, ep: int, ep_rank: int) -> int:
    """Routed experts of a layer an EP rank holds: ⌊E/ep⌋, the last rank the remainder."""
    if ep == 1:
        return experts
    base = experts // ep
    return experts - base * (ep - 1) if ep_rank == ep - 1 else base


def experts_per_layer(graph: Graph) -> int:
    """Routed experts in each MoE layer (``model_experts``); 0 for a graph without them."""
    experts = model_experts(graph)
    return experts.experts if experts is not None else 0


@dataclass(slots=True)
class Held:
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


FIRST, LAST = -1, 1 << 40
"""Where a model-level tensor sits among the layers: the embedding before them all, the final norm and head after."""


def tensor_position(layer: int | None, node: Node, graph: Graph, encoders: frozenset[str] = frozenset()) -> int:
    """Where a tensor sits: its decoder layer; an image encoder's (numbered by its own blocks) and the embedding
    before the first layer; the final norm and the head after the last."""
    if node.id in encoders:
        return FIRST
    if layer is not None:
        return layer
    if node.placement.layers:
        return node.placement.layers[0]
    return FIRST if node.id == graph.input_embedding else LAST


def stage_at(position: int, layer_stage: Mapping[int, int], pp: int) -> int:
    if position == FIRST:
        return 0
    return layer_stage.get(position, pp - 1)


TensorGroup = tuple[int, str, tuple[int, ...], str, Rule, int | None, bool]
"""Tensors added up together: position, node, shape, dtype, rule, EP owner, whether a routed expert's."""


def split_tensors(
    graph: Graph, planner: Planner, p: Parallelism
) -> tuple[Counter[TensorGroup], int, int, dict[str, int]]:
    """Every tensor of the predicted checkpoint with its rule, added up by what decides its share (a 1 T MoE has
    ~140,000 tensors, taken a layer's routed experts of one row at a time); the main model's and the MTP layers'
    bytes; the main model's bytes by split."""
    experts = experts_per_layer(graph)
    groups: Counter[TensorGroup] = Counter()
    by_split: Counter[str] = Counter()
    owners: dict[Experts, Counter[int | None]] = {}
    mtp_bytes = weight_total = 0
    main: list[ManifestGroup] = []
    for group in manifest_groups(graph):
        size = tensor_bytes(group.tensor) * group.tensor_count
        if group.tensor.part is Part.MTP:
            mtp_bytes += size
        else:
            weight_total += size
            main.append(group)
    for alike in planner.in_order(main):
        tensor, name = alike.group.tensor, alike.name
        node = planner.nodes[tensor.node]
        rule = planner.rule(alike.group, name)
        routed = routed_experts(node)  # a routed expert's tensor, or a layer's fused bank of them
        is_expert = routed is not None and (name.expert is not None or routed.fused)
        by_split[rule.split.value] += tensor_bytes(tensor) * alike.tensor_count
        position = tensor_position(name.layer, node, graph, planner.encoders)
        for owner, count in _owners(alike, rule, experts, p, owners).items():
            groups[(position, tensor.node, tensor.shape, tensor.dtype, rule, owner, is_expert)] += count
    return groups, weight_total, mtp_bytes, dict(sorted(by_split.items()))


def _owners(
    alike: Alike, rule: Rule, experts: int, p: Parallelism, memo: dict[Experts, Counter[int | None]]
) -> Counter[int | None]:
    """How many of the tensors each EP rank holds (None: each rank its share of every one); ``memo``: the counts
    for each set of routed experts met before (every layer's are alike). With redundant experts the ranks hold
    ``E + R`` slots, slot ``E + e`` a second copy of expert ``e < R``."""
    if rule.split is not Split.EXPERTS or alike.name.expert is None:
        return Counter({None: alike.tensor_count})
    slots = experts + p.redundant

    def holders(expert: int) -> list[int]:
        copies = [expert, experts + expert] if expert < p.redundant else [expert]
        return [expert_owner(slot, slots, p.ep) for slot in copies]

    if alike.experts is None:
        return Counter(holders(alike.name.expert))
    if alike.experts not in memo:
        memo[alike.experts] = Counter(owner for expert in alike.experts for owner in holders(expert))
    return memo[alike.experts]


def hold(
    graph: Graph, groups: Counter[TensorGroup], p: Parallelism, layer_stage: Mapping[int, int]
) -> dict[tuple[int, int], Held]:
    """Each rank's tensors, added up, by (stage, rank in the stage)."""
    experts = experts_per_layer(graph)
    held: dict[tuple[int, int], Held] = defaultdict(Held)
    moe_layers: set[tuple[int, int]] = set()
    # a lookup reads a row per sequence, unless a head tied to its table multiplies by all of it
    lookup = graph.input_embedding if graph.input_embedding not in tied_tables(graph) else None
    for (position, node_id, shape, dtype, rule, owner, is_expert), count in groups.items():
        stage = stage_at(position, layer_stage, p.pp)
        if is_expert:
            moe_layers.add((stage, position))
        for index in (owner,) if owner is not None else range(p.stage_ranks):  # an owner is an EP rank, EP > 1
            local = local_shape(shape, rule, p.tp, index, p.ep, p.redundant)
            elements = math.prod(local) * count
            size = elements * itemsize(dtype)
            rank = held[(stage, index)]
            rank.bytes += size
            rank.by_split[rule.split.value] += size
            rank.node_elements[node_id] += elements
            if is_expert:
                rank.expert_bytes[position] += size
            if node_id == lookup:
                rank.embedding_bytes += size
                rank.embedding_rows += local[0] * count if local else 0
    for stage, layer in moe_layers:
        for index in range(p.stage_ranks):
            held[(stage, index)].experts[layer] = local_experts(experts + p.redundant, p.ep, index if p.ep > 1 else 0)
    return held
