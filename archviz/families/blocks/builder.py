"""What every family builder uses: dimensions from config keys, tensor rows (one way to write a linear layer's),
placements, and an accumulator that turns nodes and groups, added in forward order, each with the locator that
finds its code, into a frozen ``Graph``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NotRequired, TypedDict, Unpack

from archviz.code.locators import Category, Locator, Site
from archviz.common.dtypes import SAFETENSORS_DTYPES
from archviz.families.blocks.node_words import NO_WORDS, Fill, Words, WordsTable
from archviz.families.blocks.schema import DECODER, QUANTIZATION
from archviz.graph.naming import NO_RENAMES, NamingMap
from archviz.graph.nodes import (
    Assumption,
    Dim,
    Factor,
    Graph,
    Group,
    GroupKind,
    Layer,
    ModelInfo,
    Node,
    NodeKind,
    Op,
    Part,
    Placement,
    Setting,
    Shape,
    TensorRow,
)
from archviz.inputs.settings import KeyLike, Settings, key_name

# The symbolic dimensions every decoder shares.
BATCH = Dim(symbol="B", label="batch")
POSITIONS = Dim(symbol="T", label="positions", decode_value=1)
KEY_POSITIONS = Dim(symbol="S", label="key positions", formula="cached positions + T")
TOKENS = Dim(symbol="N", label="tokens", formula="B × T")
ROUTED_TOKENS = Dim(symbol="N_e", label="routed tokens", formula="tokens routed to this expert")

LAYER = "model.layers.{layer}"
"""Checkpoint prefix of a decoder layer."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def checkpoint_dtypes(settings: Settings) -> tuple[str, tuple[int, int] | None]:
    """The unquantized dtype and, for FP8 block quantization, the block size (None for FP8 per tensor,
    ``weight_block_size: null``, which ``archviz.families.fp8`` marks once the graph is built)."""
    name = settings.declared_dtype().name  # a known dtype: torch_dtype/dtype with transformers' precedence
    quantization = settings.mapping(QUANTIZATION.quantization_config)
    if quantization is None:
        return SAFETENSORS_DTYPES[name], None
    method = settings.text(QUANTIZATION.quantization_config, "quant_method", default="")
    if method != "fp8":
        return SAFETENSORS_DTYPES[name], None
    block = settings.values[QUANTIZATION.quantization_config.name].get("weight_block_size")
    if block is None:
        return SAFETENSORS_DTYPES[name], None
    if (
        not isinstance(block, list)
        or len(block) != 2
        or not all(isinstance(item, int) and not isinstance(item, bool) and item > 0 for item in block)
    ):
        raise settings.fail(
            (QUANTIZATION.quantization_config, "weight_block_size"), "expected two positive integers or null"
        )
    return SAFETENSORS_DTYPES[name], (block[0], block[1])


UE8M0_SCALES = (
    "scale_fmt ue8m0 says the scales' values are powers of two (UE8M0), not how they are stored: weight_scale_inv is "
    "predicted F32, as DeepSeek-V3.1's release stores it (its o_proj scales are not powers of two, which no E8M0 byte "
    "holds: deepseek-ai/DeepSeek-V3#961); transformers 5.24 allocates F8_E8M0 scales for ue8m0 (FineGrainedFP8Config, "
    "DeepSeek-V4's layout), and a checkpoint's headers settle which (archviz check)"
)


def scale_format(settings: Settings) -> Assumption | None:
    """What an FP8 block-quantized config's ``scale_fmt: ue8m0`` is taken to mean for the stored scales, said; None
    when the config sets no such scale format."""
    quantization = settings.mapping(QUANTIZATION.quantization_config)
    if quantization is None or quantization.get("quant_method") != "fp8" or quantization.get("scale_fmt") != "ue8m0":
        return None
    return Assumption(key=f"{QUANTIZATION.quantization_config}.scale_fmt", value=json.dumps("F32"), source=UE8M0_SCALES)


def fixed(label: str, value: int, formula: KeyLike, symbol: str | None = None) -> Dim:
    """A dimension the config fixes; its config keys are the identifiers in ``formula`` (a key, or an expression in
    keys)."""
    text = key_name(formula)
    return Dim(
        symbol=symbol or label,
        label=label,
        value=value,
        formula=text,
        config_keys=tuple(dict.fromkeys(_IDENTIFIER.findall(text))),
    )


def shape(name: str, *dims: Dim, dtype: str | None = None) -> Shape:
    """A named tensor shape."""
    return Shape(name=name, dims=dims, dtype=dtype)


def hidden(d: Dim) -> Shape:
    """The residual stream's shape, ``(B, T, d)``."""
    return shape("hidden_states", BATCH, POSITIONS, d)


def factor(name: KeyLike, value: int) -> Factor:
    """One factor of a calculation (named by a key, or an expression in keys)."""
    return Factor(name=key_name(name), value=value)


def layer_placement(layers: Sequence[int], *, per_layer: int = 1, active_per_layer: int | None = None) -> Placement:
    """Instances in the given checkpoint layers."""
    active = per_layer if active_per_layer is None else active_per_layer
    return Placement(
        layers=tuple(layers),
        per_layer=per_layer,
        active_per_layer=active,
        count=len(layers) * per_layer,
        active=len(layers) * active,
    )


MODEL_LEVEL = Placement()


class NodeFields(TypedDict, total=False):
    """What a node may have besides its identity and place: its tensors, settings and config keys."""

    inputs: Iterable[Shape]
    """Tensors it reads."""
    outputs: Iterable[Shape]
    """Tensors it produces."""
    parameters: Iterable[TensorRow]
    """Learned tensors per instance."""
    buffers: Iterable[TensorRow]
    """Persistent buffers per instance."""
    settings: Iterable[Setting]
    """Hyperparameters that shape it."""
    extra_keys: Iterable[str]
    """Config keys it uses beyond those its shapes, rows and settings name."""
    shares_parameters_with: str | None
    """Id of the node whose weight it reuses."""
    op: Op | None
    """What it computes, for the cost model."""
    traced_module: str | None
    """For a tensor state, the module whose first output it is (``Node.traced_module``)."""


class StateHead(TypedDict):
    """What a tensor state has besides its value: its identity, place and the module that outputs it."""

    words: NotRequired[Words | None]
    """Its title and summary, from a words table."""
    title: NotRequired[str | None]
    """Display title (when not from ``words``)."""
    code: str
    """The expression that holds it in the modeling code."""
    summary: NotRequired[str | None]
    """What it is, in a sentence (when not from ``words``)."""
    group: str
    """The group it joins."""
    placement: NotRequired[Placement]
    """Where its instances are (the model level unless said)."""
    part: NotRequired[Part]
    """Main model or MTP layers."""
    locate: NotRequired[Locator | None]
    """How to find its code."""
    traced_module: NotRequired[str | None]
    """The module whose first output it is (``Node.traced_module``)."""


class ScopedHead(TypedDict):
    """What a scope's tensor state has besides its id and value: its code, where that is found, and its words
    (``Scope.node``'s arguments of the same names)."""

    code: str
    """The expression that holds it in the modeling code."""
    sites: tuple[Site, ...]
    """Where its producing code is found."""
    fill: NotRequired[Fill | None]
    """The values its table words are filled with."""
    title: NotRequired[str | None]
    """Its title, when its words are given rather than the table's (with ``summary`` and ``claim``)."""
    summary: NotRequired[str | None]
    """Its summary, likewise."""
    claim: NotRequired[str | None]
    """Its claim, likewise."""
    category: NotRequired[Category | None]
    """Its evidence tag, when not the scope's."""
    absent: NotRequired[str | None]
    """Why its code may be missing from a file (``Locator.absent``)."""
    context: NotRequired[tuple[str, ...]]
    """Node or group ids whose evidence is contextual here (``Locator.context``)."""


def _title_summary(words: Words | None, title: str | None, summary: str | None) -> tuple[str, str]:
    """The title and summary of ``words``, or those given: the generic family's, which writes its words from
    transformers' modules rather than from a table."""
    if words is not None:
        return words.title, words.summary
    if title is None or summary is None:
        raise ValueError("a node or group needs words or a title and a summary")
    return title, summary


@dataclass(slots=True)
class _GroupDraft:
    title: str
    kind: GroupKind
    summary: str
    placement: Placement
    parent: str | None
    locate: Locator | None
    members: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """A wrapper's language model, built by its text family's builder: what its names and locators say otherwise."""

    checkpoint_prefix: str
    """Put before every checkpoint name and traced module of the text model (Kimi-K2.5's ``language_model.``)."""
    file: str
    """The code part its locators cite (``Locator.file``: ``text``, the text family's modeling file)."""


class GraphBuilder:
    """Collects nodes and groups in forward order for one config.

    With ``text``, the graph is a wrapper's: what is added is its language model's (names under the text part's
    prefix, located in the text part's file) except inside ``outside_text`` (the vision tower, the projector)."""

    def __init__(
        self,
        settings: Settings,
        *,
        dtype: str,
        quantization_block: tuple[int, int] | None,
        text: TextPart | None = None,
    ):
        self.settings = settings
        self.dtype = dtype
        self.quantization_block = quantization_block
        self.quantized_dtype = "F8_E4M3"
        self.text = text
        self._outside_text = False
        self._nodes: list[Node] = []
        self._node_ids: set[str] = set()
        self._groups: dict[str, _GroupDraft] = {}

    @contextmanager
    def outside_text(self) -> Iterator[None]:
        """For the duration, what is added is the wrapper's own (its names and locators as given)."""
        self._outside_text = True
        try:
            yield
        finally:
            self._outside_text = False

    def _text_part(self) -> TextPart | None:
        return None if self._outside_text else self.text

    def _located(self, locate: Locator | None) -> Locator | None:
        text = self._text_part()
        return locate if text is None or locate is None else replace(locate, file=text.file)

    # -- tensors ------------------------------------------------------------------------------

    def tensor(
        self,
        component: str,
        tensor: str,
        factors: Sequence[Factor],
        *,
        quantized: bool = False,
        dtype: str | None = None,
    ) -> TensorRow:
        """A checkpoint tensor whose shape is the factors' values, outermost first."""
        block = self.quantization_block if quantized else None
        text = self._text_part()
        return TensorRow(
            component=component,
            tensor=tensor if text is None else text.checkpoint_prefix + tensor,
            shape=tuple(item.value for item in factors),
            factors=tuple(factors),
            elements=math.prod(item.value for item in factors),
            dtype=dtype or (self.quantized_dtype if block else self.dtype),
            scale_block=block,
        )

    # -- structure ----------------------------------------------------------------------------

    def group(
        self,
        id: str,
        *,
        kind: GroupKind,
        parent: str | None,
        words: Words | None = None,
        title: str | None = None,
        summary: str | None = None,
        placement: Placement = MODEL_LEVEL,
        locate: Locator | None = None,
    ) -> str:
        """Open a group (it stays open: members join it by naming it), with ``words`` from a words table."""
        if id in self._groups or id in self._node_ids:
            raise ValueError(f"duplicate id {id}")
        title, summary = _title_summary(words, title, summary)
        self._groups[id] = _GroupDraft(
            title=title, kind=kind, summary=summary, placement=placement, parent=parent, locate=self._located(locate)
        )
        if parent is not None:
            self._groups[parent].members.append(id)
        return id

    def node(
        self,
        id: str,
        *,
        kind: NodeKind,
        code: str,
        group: str,
        words: Words | None = None,
        title: str | None = None,
        summary: str | None = None,
        placement: Placement = MODEL_LEVEL,
        part: Part = Part.MAIN,
        locate: Locator | None = None,
        **fields: Unpack[NodeFields],
    ) -> str:
        """Add an operator or tensor state to a group, after everything added before it, with ``words`` from a words
        table."""
        if id in self._node_ids or id in self._groups:
            raise ValueError(f"duplicate id {id}")
        title, summary = _title_summary(words, title, summary)
        inputs, outputs = tuple(fields.get("inputs", ())), tuple(fields.get("outputs", ()))
        parameters, buffers = tuple(fields.get("parameters", ())), tuple(fields.get("buffers", ()))
        settings = tuple(fields.get("settings", ()))
        keys = self._config_keys(inputs, outputs, parameters, buffers, settings, fields.get("extra_keys", ()))
        node = Node(
            id=id,
            title=title,
            kind=kind,
            code=code,
            summary=summary,
            group=group,
            inputs=inputs,
            outputs=outputs,
            parameters=parameters,
            buffers=buffers,
            placement=placement,
            settings=settings,
            config_keys=keys,
            part=part,
            shares_parameters_with=fields.get("shares_parameters_with"),
            locate=self._located(locate),
            op=fields.get("op"),
            traced_module=self._traced(fields.get("traced_module")),
        )
        self._nodes.append(node)
        self._node_ids.add(id)
        self._groups[group].members.append(id)
        return id

    def _traced(self, module: str | None) -> str | None:
        text = self._text_part()
        return module if text is None or module is None else text.checkpoint_prefix + module

    def state(self, id: str, *, value: Shape, **head: Unpack[StateHead]) -> str:
        """Add a tensor state: a node whose single output is the tensor itself (``traced_module`` outputs it)."""
        return self.node(id, kind=NodeKind.TENSOR, outputs=(value,), **head)

    def _config_keys(
        self,
        inputs: tuple[Shape, ...],
        outputs: tuple[Shape, ...],
        parameters: tuple[TensorRow, ...],
        buffers: tuple[TensorRow, ...],
        settings: tuple[Setting, ...],
        extra: Iterable[str],
    ) -> tuple[str, ...]:
        keys: list[str] = []
        for tensor in (*inputs, *outputs):
            for dim in tensor.dims:
                keys.extend(dim.config_keys)
        for row in (*parameters, *buffers):
            for item in row.factors:
                keys.extend(_IDENTIFIER.findall(item.name))
        for setting in settings:
            keys.extend(setting.config_keys)
        keys.extend(extra)
        # A key of the settings, or (a wrapper's vision_config.patch_size) of the whole file.
        document = self.settings.document.data
        known = [key for key in keys if self.settings.has(key.split(".")[0]) or key.split(".")[0] in document]
        return tuple(dict.fromkeys(known))

    def finish(
        self,
        model: ModelInfo,
        *,
        input_embedding: str | None,
        layers: Iterable[Layer] = (),
        not_modelled: Iterable[str] = (),
        notes: Iterable[str] = (),
        beyond_transformers: Iterable[str] = (),
        partial: bool = False,
        derived_from_code: bool = False,
        naming: NamingMap = NO_RENAMES,
        layer_keys: Iterable[str] = (),
    ) -> Graph:
        """Freeze everything added into a graph (``naming``, ``layer_keys``: as ``Graph`` says)."""
        groups = tuple(
            Group(
                id=id,
                title=draft.title,
                kind=draft.kind,
                summary=draft.summary,
                members=tuple(draft.members),
                placement=draft.placement,
                parent=draft.parent,
                locate=draft.locate,
            )
            for id, draft in self._groups.items()
        )
        return Graph(
            model=model,
            nodes=tuple(self._nodes),
            groups=groups,
            dtype=self.dtype,
            input_embedding=input_embedding,
            layers=tuple(layers),
            not_modelled=tuple(not_modelled),
            notes=tuple(notes),
            beyond_transformers=tuple(beyond_transformers),
            partial=partial,
            derived_from_code=derived_from_code,
            naming=naming,
            layer_keys=tuple(layer_keys),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """Where a builder step adds its nodes: one group, one placement, one part, one evidence category.

    ``node`` and ``state`` add ``prefix + id`` to the group with the locator its ``sites`` make; the node's title,
    summary and claim are ``words``' entry for ``id`` (``archviz.families.blocks.node_words``), filled with the
    values the step passes, so a step says only the structure that differs between its nodes. (The generic family
    passes its words instead: it writes them from transformers' modules.)
    """

    b: GraphBuilder
    """The builder the nodes go to."""
    group: str
    """The group they join."""
    placement: Placement
    """Where their instances are."""
    part: Part = Part.MAIN
    """Main model or MTP layers."""
    prefix: str = ""
    """Prepended to every id (``mtp.attention.``)."""
    category: Category = Category.BLOCK
    """The evidence tag of their locators, unless a node says otherwise."""
    words: WordsTable = NO_WORDS
    """The words of its nodes, by the id a step passes (without ``prefix``)."""

    def _words(self, id: str, fill: Fill | None, title: str | None, summary: str | None, claim: str | None) -> Words:
        """The table's words for ``id``, or the words given (the generic family's)."""
        if title is None and summary is None and claim is None:
            return self.words.words(id, fill)
        if title is None or summary is None or claim is None:
            raise ValueError(f"{id}: words from the table or a title, a summary and a claim")
        return Words(title=title, summary=summary, claim=claim)

    def node(
        self,
        id: str,
        *,
        kind: NodeKind,
        code: str,
        sites: tuple[Site, ...],
        fill: Fill | None = None,
        title: str | None = None,
        summary: str | None = None,
        claim: str | None = None,
        category: Category | None = None,
        absent: str | None = None,
        context: tuple[str, ...] = (),
        placement: Placement | None = None,
        **fields: Unpack[NodeFields],
    ) -> str:
        """Add a node whose code ``sites`` find; its words are the table's for ``id``, filled with ``fill``."""
        words = self._words(id, fill, title, summary, claim)
        return self.b.node(
            self.prefix + id,
            words=words,
            kind=kind,
            code=code,
            group=self.group,
            placement=self.placement if placement is None else placement,
            part=self.part,
            locate=Locator(
                claim=words.claim, category=category or self.category, sites=sites, absent=absent, context=context
            ),
            **fields,
        )

    def state(self, id: str, *, value: Shape, traced_module: str | None = None, **head: Unpack[ScopedHead]) -> str:
        """Add a tensor state whose producing code ``sites`` find (and ``traced_module`` outputs, when one does); its
        words are the table's for ``id``, filled with ``fill``."""
        return self.node(id, kind=NodeKind.TENSOR, outputs=(value,), traced_module=traced_module, **head)


def joined(*parts: tuple[str, int]) -> tuple[str, int]:
    """Several output factors as the one flattened dimension a checkpoint stores: ``num_attention_heads ×
    (qk_nope_head_dim + qk_rope_head_dim)`` (a sum in parentheses) and the product of their values."""
    terms = (Factor(name=name, value=value).term for name, value in parts)
    return " × ".join(terms), math.prod(value for _, value in parts)


def linear_rows(
    b: GraphBuilder,
    title: str,
    tensor: str,
    out: tuple[KeyLike, int],
    into: tuple[KeyLike, int],
    *,
    bias: bool,
    quantized: bool = True,
) -> list[TensorRow]:
    """An ``nn.Linear``'s checkpoint tensors: ``weight`` ``[out, in]`` and, with ``bias``, ``bias`` ``[out]``.

    ``tensor`` is the module's checkpoint name (``model.layers.{layer}.self_attn.q_proj``); ``out`` and ``into``
    are (config expression, value). The weight is block-quantized when the checkpoint is and ``quantized``
    allows; the bias never.
    """
    weight = b.tensor(f"{title} weight", f"{tensor}.weight", [factor(*out), factor(*into)], quantized=quantized)
    rows = [replace(weight, module="Linear")]
    if bias:
        rows.append(b.tensor(f"{title} bias", f"{tensor}.bias", [factor(*out)]))
    return rows


def swiglu_rows(
    b: GraphBuilder,
    tensor: str,
    *,
    width_name: KeyLike,
    width: int,
    d: int,
    title: str,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
    bias: bool = False,
) -> list[TensorRow]:
    """The weights of a SwiGLU network: gate and up ``[width, d]``, down ``[d, width]`` (and their biases)."""
    gate, up, down = names
    return [
        *linear_rows(
            b, f"{title} {gate}", f"{tensor}.{gate}", (width_name, width), (DECODER.hidden_size, d), bias=bias
        ),
        *linear_rows(b, f"{title} {up}", f"{tensor}.{up}", (width_name, width), (DECODER.hidden_size, d), bias=bias),
        *linear_rows(
            b, f"{title} {down}", f"{tensor}.{down}", (DECODER.hidden_size, d), (width_name, width), bias=bias
        ),
    ]
