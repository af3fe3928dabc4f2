"""The data flow of a graph: which operator's output each operator reads, derived from the graph alone.

A graph lists its nodes in forward order and names every tensor an operator reads or writes (``Shape.name``, the
variable in the modeling code), but stores no edges. This module reads the edges off those names the way Python
reads a function body: a name refers to its latest assignment, looked up from the innermost group outwards (a group
is a function: it sees its callers' names, and its own names do not leak out). What a nested group returns (its
last operator's output) is handed to the operator after it that merges it with something else (the residual add,
the routed + shared sum), or, if none does, to the next one that reads a tensor of that name, in its own group or
in a later sibling group (the vision tower's ``pooled_hidden_states``, the projector's input). Where the names do
not tell, the code does: an operator whose input names repeat (``x``, ``x``) or resolve to nothing is read through
the argument names of its call (``chunk_kimi_delta_attention(query, key, value, g=g, beta=beta)``). Two statements
that no graph node stands for are read as the code writes them: ``residual = hidden_states`` (the stream as it was
at the latest residual-stream state) and an input that nothing names, which takes what the group has produced and
not yet used (``mixed_qkv`` is the q, k and v projections). A residual addition written around its sublayer's call
(``hidden_states + self.attn(self.norm1(hidden_states))``) skips from the stream, not from the normalized copy.
The edges into attention's core carry their role (query, key, value), read off the names the core is called with.

Tensor states become the labels of the edges that carry them; a state that no operator reads (a cache, the final
logits) or that no operator has just produced (the residual stream entering a block) is a node of its own.

A graph read off the code carries its data flow as traced (``Graph.flow``): its edges are drawn as they are, never
inferred from names or order, and a node no traced tensor reached is drawn unconnected.

Pure functions of the graph; no I/O. ``input_roles`` is what the cards call each input, from the same reading.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from archviz.graph.nodes import DataEdge, Graph, Group, GroupKind, Node, NodeKind, Shape
from archviz.graph.shapes import Phase, format_shape

RESIDUAL_NAMES = ("residual",)
"""Input names that read the residual stream as it was at the latest residual-stream state (``residual =
hidden_states`` in the decoder layer's forward, which is no node of the graph)."""
MODEL_INPUTS = frozenset({"input_ids", "position_ids", "attention_mask", "cache_position", "token_type_ids"})
"""Arguments of a model's forward that no operator produces: they enter the diagram as inputs."""
STREAM_NAME = "hidden_states"
"""The residual stream's name in the modeling code."""
ATTENTION_ROLES: dict[str, frozenset[str]] = {
    "query": frozenset({"query", "query_states", "q"}),
    "key": frozenset({"key", "key_states", "k"}),
    "value": frozenset({"value", "value_states", "v"}),
}
"""What attention's core calls its three inputs, by role: ``attention_interface(self, query_states, key_states,
value_states, ...)`` (transformers' attention modules), ``chunk_kimi_delta_attention(query, key, value, ...)``
(Kimi-Linear's KDA), ``eager_attention_forward(module, query, key, value, ...)``."""


class FlowKind(StrEnum):
    """What a box of the diagram is."""

    OPERATOR = "operator"
    """A graph operator (learned or parameter-free)."""
    TENSOR = "tensor"
    """A tensor state drawn as a node: an entry to a group, a cache, an output."""
    INPUT = "input"
    """A model input no node produces (``input_ids``, ``position_ids``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowNode:
    """A box of the diagram."""

    id: str
    """The graph node's id, or ``input.NAME`` for a model input."""
    kind: FlowKind
    """Operator, tensor state or model input."""
    group: str | None
    """The innermost group holding it (None for model inputs, drawn at the top level)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowEdge:
    """A tensor passing from one box to another."""

    source: str
    """Producing box."""
    target: str
    """Consuming box."""
    shape: Shape | None
    """The tensor's shape, as its producer (or its tensor state) gives it."""
    tensor: str | None = None
    """The tensor state the edge carries, when the graph names one."""
    labelled: bool = True
    """Whether the edge shows its tensor and shape (the first edge out of a value does; fan-out copies do not)."""
    residual: bool = False
    """A residual connection (the skip around a sublayer)."""
    state: bool = False
    """A link between an operator and the state it keeps (a convolution window), not a data flow."""
    role: str | None = None
    """``query``, ``key`` or ``value`` on the edges into attention's core (see ``attention_roles``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Flow:
    """A graph's data flow: boxes in forward order and the edges between them."""

    nodes: tuple[FlowNode, ...]
    """Every box, in forward order."""
    edges: tuple[FlowEdge, ...]
    """Every edge, in the order the consumers read them."""
    labels: dict[str, str] = field(default_factory=dict)
    """Tensor state id -> the box whose output it labels (tensor states drawn as edge labels)."""


@dataclass(slots=True, eq=False)
class _Value:
    """A tensor bound to a name: who produced it, which output, and the tensor state that names it."""

    producer: str
    shape: Shape | None
    tensor: str | None = None
    used: bool = False
    serial: int = 0


@dataclass(slots=True)
class _Scope:
    """One group's names, the values it produced and has not used, and what its callers see."""

    group: str
    parent: _Scope | None
    names: dict[str, list[_Value]] = field(default_factory=dict)
    produced: list[_Value] = field(default_factory=list)
    pending: list[tuple[frozenset[str], list[_Value]]] = field(default_factory=list)
    last: list[_Value] = field(default_factory=list)
    last_names: frozenset[str] = frozenset()

    def bind(self, name: str, value: _Value) -> None:
        self.names.setdefault(name, []).append(value)
        self.produced.append(value)

    def history(self, name: str) -> list[_Value]:
        """Every value bound to ``name``, innermost scope's latest first."""
        found: list[_Value] = []
        scope: _Scope | None = self
        while scope is not None:
            found.extend(reversed(scope.names.get(name, [])))
            scope = scope.parent
        return found

    def chain(self) -> list[_Scope]:
        scopes: list[_Scope] = []
        scope: _Scope | None = self
        while scope is not None:
            scopes.append(scope)
            scope = scope.parent
        return scopes


def _expression(code: str) -> ast.expr | None:
    """The node's code as an expression; the ``...`` that shortens a long call (``f(a, b=b, ...)``) dropped."""
    try:
        return ast.parse(code.strip().replace(", ...)", ")").replace("(…)", "()"), mode="eval").body
    except SyntaxError:
        return None


def call_arguments(code: str) -> tuple[str, ...]:
    """The plain variable names a call passes, positional first (``f(q, k, v, g=g)`` -> q, k, v, g); else ()."""
    tree = _expression(code)
    while isinstance(tree, ast.Subscript):  # torch.topk(...)[1]
        tree = tree.value
    if not isinstance(tree, ast.Call):
        return ()
    names = [arg.id for arg in tree.args if isinstance(arg, ast.Name)]
    names += [item.value.id for item in tree.keywords if item.arg and isinstance(item.value, ast.Name)]
    return tuple(names)


def _operands(code: str) -> tuple[str, ...]:
    """The two sides of a binary expression as the code writes them (``residual + hidden_states``); else ()."""
    tree = _expression(code)
    if not isinstance(tree, ast.BinOp):
        return ()
    return ast.unparse(tree.left), ast.unparse(tree.right)


def input_roles(node: Node) -> tuple[str, ...]:
    """What each input is called: its tensor name, or where two inputs share one, the code's own names for them
    (the call's arguments, or the two sides of ``a * b``)."""
    names = tuple(item.name for item in node.inputs)
    if len(set(names)) == len(names):
        return names
    arguments = call_arguments(node.code)
    if len(arguments) >= len(names) and len(set(arguments[: len(names)])) == len(names):
        return arguments[: len(names)]
    operands = _operands(node.code)
    if len(operands) == len(names) and len(set(operands)) == len(names):
        return operands
    return names


def attention_roles(node: Node) -> tuple[str | None, ...]:
    """Each input's role if ``node`` is attention's core (it reads a query, a key and a value, by the names in
    ``ATTENTION_ROLES``), else None for every input."""
    found = tuple(
        next((role for role, names in ATTENTION_ROLES.items() if name in names), None) for name in input_roles(node)
    )
    return found if set(ATTENTION_ROLES) <= set(found) else tuple(None for _ in found)


class _Reader:
    """Walks a graph's groups in forward order and records boxes and edges."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes_by_id = {node.id: node for node in graph.nodes}
        self.groups = {group.id: group for group in graph.groups}
        self.boxes: list[FlowNode] = []
        self.edges: list[FlowEdge] = []
        self.labels: dict[str, str] = {}
        self.inputs: dict[str, _Value] = {}
        self.serial = 0

    # -- values and edges

    def value(self, producer: str, shape: Shape | None) -> _Value:
        self.serial += 1
        return _Value(producer=producer, shape=shape, serial=self.serial)

    def connect(self, value: _Value, target: str, *, residual: bool = False, role: str | None = None) -> None:
        self.edges.append(
            FlowEdge(
                source=value.producer,
                target=target,
                shape=value.shape,
                tensor=value.tensor,
                labelled=(role is not None or not value.used) and not residual,
                residual=residual,
                role=role,
            )
        )
        value.used = True

    # -- the walk

    def walk(self, group: Group, scope: _Scope) -> list[_Value]:
        """Read a group's members; returns what the group hands back (its last operator's outputs)."""
        for run in choice_runs(self.graph, group):
            if len(run) == 1 and run[0] in self.nodes_by_id:
                self.node(self.nodes_by_id[run[0]], scope)
                continue
            results: list[_Value] = []
            names: set[str] = set()
            for member in run:
                inner = _Scope(group=member, parent=scope)
                returned = self.walk(self.groups[member], inner)
                results.extend(returned)
                names.update(inner.last_names)
            scope.pending.append((frozenset(names), results))
            scope.last, scope.last_names = results, frozenset(names)
        return scope.last

    def node(self, node: Node, scope: _Scope) -> None:
        if node.kind is NodeKind.TENSOR:
            self.tensor(node, scope)
            return
        self.boxes.append(FlowNode(id=node.id, kind=FlowKind.OPERATOR, group=node.group))
        self.read_inputs(node, scope)
        if not node.inputs and node.outputs and self.graph.derived_from_code:
            # A graph read off code knows a module's outputs but not always what it reads: the value before it.
            latest = self.latest_value(scope)
            if latest is not None:
                self.connect(latest, node.id)
        outputs = [self.value(node.id, shape) for shape in node.outputs]
        for shape, value in zip(node.outputs, outputs, strict=True):
            scope.bind(shape.name, value)
        scope.last, scope.last_names = outputs, frozenset(shape.name for shape in node.outputs)

    def tensor(self, node: Node, scope: _Scope) -> None:
        name = node.outputs[0].name if node.outputs else ""
        labelled = [] if name not in scope.last_names else [value for value in scope.last if value.tensor is None]
        named = [value for value in labelled if value.shape is None or value.shape.name == name]
        labelled = named or labelled
        if labelled:
            for value in labelled:
                value.tensor = node.id
                self.labels.setdefault(node.id, value.producer)
            return
        # Nothing has just produced it: a state of its own (the stream entering a block, a cache).
        self.boxes.append(FlowNode(id=node.id, kind=FlowKind.TENSOR, group=node.group))
        shape = node.outputs[0] if node.outputs else None
        feed = self.latest(scope, name) or self.same_shape(scope, shape)
        if feed is not None:
            self.connect(feed, node.id)
        elif scope.last:
            self.edges.append(FlowEdge(source=scope.last[0].producer, target=node.id, shape=None, state=True))
        value = self.value(node.id, shape)
        value.tensor = node.id
        value.used = feed is None and bool(scope.last)
        if feed is not None or not scope.last:
            scope.bind(name, value)
            scope.last, scope.last_names = [value], frozenset({name})

    # -- resolving one operator's inputs

    def read_inputs(self, node: Node, scope: _Scope) -> None:
        roles, attention = input_roles(node), attention_roles(node)
        taken: list[_Value] = []
        inline = self.inline_residual(node)
        for position, shape in enumerate(node.inputs):
            role = roles[position]
            residual = shape.name in RESIDUAL_NAMES or (inline and position == 0)
            found = (
                (self.stream_before_sublayer(scope, taken) if inline else self.residual(scope, taken))
                if residual
                else self.from_pending(node, scope, {role, shape.name}, taken)
                or self.by_name(scope, role, taken)
                or self.by_name(scope, shape.name, taken)
            )
            values = [found] if found is not None else self.unresolved(node, scope, shape, taken)
            for value in values:
                taken.append(value)
                self.connect(value, node.id, residual=residual, role=attention[position])

    def from_pending(self, node: Node, scope: _Scope, names: set[str], taken: list[_Value]) -> _Value | None:
        """A nested group's result, if this operator is the one to receive it; the result's other values (the
        alternatives' results) are connected here as well."""
        for index, (result_names, values) in enumerate(scope.pending):
            if not names & result_names or not self.receives(node, scope, result_names):
                continue
            del scope.pending[index]
            for value in values[1:]:
                taken.append(value)
                self.connect(value, node.id)
            return values[0]
        return None

    def receives(self, node: Node, scope: _Scope, names: frozenset[str]) -> bool:
        """Whether ``node`` takes a pending result named ``names``: it merges two inputs, or no later operator of
        the scope that merges does."""
        if len(node.inputs) > 1:
            return True
        group = self.groups[scope.group]
        after = group.members[group.members.index(node.id) + 1 :]
        later = [self.nodes_by_id[member] for member in after if member in self.nodes_by_id]
        return not any(len(other.inputs) > 1 and names & {s.name for s in other.inputs} for other in later)

    @staticmethod
    def by_name(scope: _Scope, name: str, taken: list[_Value]) -> _Value | None:
        for value in scope.history(name):
            if value not in taken:
                return value
        return None

    @staticmethod
    def latest(scope: _Scope, name: str) -> _Value | None:
        history = scope.history(name)
        return history[0] if history else None

    def residual(self, scope: _Scope, taken: list[_Value]) -> _Value | None:
        """The stream at the latest residual-stream state of this group that the operator does not already read."""
        for value in scope.history(STREAM_NAME):
            tensor = self.nodes_by_id.get(value.tensor or "")
            if tensor is not None and tensor.group == scope.group and value not in taken:
                return value
        return None

    def inline_residual(self, node: Node) -> bool:
        """A block's residual addition written around its sublayer's call, with no ``residual`` variable:
        ``hidden_states = hidden_states + self.attn(self.norm1(hidden_states), ...)`` (Kimi-K2.5's vision encoder
        layer). Its left side is the stream, not the normalized copy the graph also names ``hidden_states``."""
        group = self.groups.get(node.group)
        names = [shape.name for shape in node.inputs]
        return (
            group is not None
            and group.kind is GroupKind.BLOCK
            and names == [STREAM_NAME, STREAM_NAME]
            and _operands(node.code)[:1] == (STREAM_NAME,)
        )

    def stream_before_sublayer(self, scope: _Scope, taken: list[_Value]) -> _Value | None:
        """The stream as the block last added to it (the previous residual addition), or as it entered the block."""
        for value in reversed(scope.names.get(STREAM_NAME, [])):
            producer = self.nodes_by_id.get(value.producer)
            if producer is not None and self.inline_residual(producer) and value not in taken:
                return value
        return self.by_name(scope.parent, STREAM_NAME, taken) if scope.parent is not None else None

    def unresolved(self, node: Node, scope: _Scope, shape: Shape, taken: list[_Value]) -> list[_Value]:
        """An input no name resolves: the call's own arguments, what the group has produced and not used, a value
        of the same shape, or else a model input."""
        if shape.name in self.inputs:  # an input of the diagram read again (a group's diagram on its own)
            return [self.inputs[shape.name]]
        through_arguments: list[_Value] = []
        for name in call_arguments(node.code):
            value = self.by_name(scope, name, [*taken, *through_arguments]) or self.inputs.get(name)
            if value is not None and value.producer != node.id and value not in through_arguments:
                through_arguments.append(value)
        if through_arguments:
            return through_arguments
        handed = self.handed_in(scope, shape.name)
        if handed is not None:
            return [handed]
        if shape.name in MODEL_INPUTS or not self.serial:
            return [self.model_input(shape)]
        if scope.parent is None:  # at model level, the operator before it (a graph read off code names no tensors)
            latest = self.latest_value(scope)
            return [latest] if latest is not None else [self.model_input(shape)]
        unused = [value for value in scope.produced if not value.used and value not in taken]
        if unused:
            return unused
        same = self.same_shape(scope, shape)
        if same is not None:
            return [same]
        return [self.model_input(shape)]

    @staticmethod
    def handed_in(scope: _Scope, name: str) -> _Value | None:
        """What an earlier sibling group returned under this name, read by the first operator of a later group (the
        vision tower's ``pooled_hidden_states``, the projector's input: ``self.mm_projector(vision_outputs.
        pooler_output)`` in ``get_image_features``); it is no longer pending once read."""
        for outer in scope.chain()[1:]:
            for index, (names, values) in enumerate(outer.pending):
                if name in names:
                    del outer.pending[index]
                    return values[0]
        return None

    @staticmethod
    def latest_value(scope: _Scope) -> _Value | None:
        """The value produced last in this group or around it."""
        values = [value for outer in scope.chain() for value in outer.produced]
        return max(values, key=lambda value: value.serial, default=None)

    def same_shape(self, scope: _Scope, shape: Shape | None) -> _Value | None:
        if shape is None:
            return None
        wanted = format_shape(shape, Phase.PREFILL)
        candidates = [
            value
            for outer in scope.chain()
            for value in outer.produced
            if value.shape is not None and format_shape(value.shape, Phase.PREFILL) == wanted
        ]
        return max(candidates, key=lambda value: value.serial) if candidates else None

    def model_input(self, shape: Shape) -> _Value:
        """The input box of that name (one per name), and the value it feeds."""
        if shape.name not in self.inputs:
            box = FlowNode(id=f"input.{shape.name}", kind=FlowKind.INPUT, group=None)
            self.boxes.insert(len(self.inputs), box)
            self.inputs[shape.name] = self.value(box.id, shape)
        return self.inputs[shape.name]

    def finish(self, scope: _Scope) -> None:
        """Tensor states that label a value no operator read become boxes of their own (caches, outputs)."""
        for node in self.graph.nodes:
            if node.kind is not NodeKind.TENSOR or node.id not in self.labels:
                continue
            if any(edge.tensor == node.id for edge in self.edges):
                continue
            producer = self.labels.pop(node.id)
            self.boxes.append(FlowNode(id=node.id, kind=FlowKind.TENSOR, group=node.group))
            shape = node.outputs[0] if node.outputs else None
            self.edges.append(FlowEdge(source=producer, target=node.id, shape=shape, tensor=node.id))


def choice_runs(graph: Graph, group: Group) -> list[list[str]]:
    """A group's members in order, consecutive sibling groups that split the group's layers between them joined
    (the KDA and MLA mixers, the dense MLP and the MoE): one of them runs in each layer."""
    groups = {item.id: item for item in graph.groups}
    result: list[list[str]] = []
    layers = set(group.placement.layers)
    for member in group.members:
        inner = groups.get(member)
        previous = result[-1] if result else None
        if (
            inner is not None
            and previous is not None
            and previous[0] in groups
            and layers
            and all(set(groups[g].placement.layers).isdisjoint(inner.placement.layers) for g in previous)
            and set(inner.placement.layers) < layers
            and all(set(groups[g].placement.layers) < layers for g in previous)
        ):
            previous.append(member)
        else:
            result.append([member])
    return result


def drawn_members(graph: Graph, flow: Flow, group: Group) -> Iterator[FlowNode | Group]:
    """A group's boxes and nested groups in the order a diagram draws them (alternatives next to each other): the
    one walk the SVG diagram and the Mermaid flowchart share."""
    boxes = {box.id: box for box in flow.nodes if box.group == group.id}
    groups = {item.id: item for item in graph.groups}
    for run in choice_runs(graph, group):
        for member in run:
            if member in boxes:
                yield boxes[member]
            elif member in groups:
                yield groups[member]


def traced_flow(graph: Graph, edges: tuple[DataEdge, ...]) -> Flow:
    """A graph's traced data flow (``Graph.flow``) as boxes and edges: the model inputs first, then every node in
    forward order; the first edge out of a box with a given shape shows it, residual edges show none. In the part of
    a graph inside one group (``diagram.group_graph``), what enters from a node outside is an input named by it."""
    present = {node.id for node in graph.nodes}
    edges = tuple(edge for edge in edges if edge.target in present)
    outside = {edge.source for edge in edges if not edge.from_input and edge.source not in present}
    inputs = dict.fromkeys(f"input.{edge.source}" for edge in edges if edge.from_input or edge.source in outside)
    boxes = [FlowNode(id=box, kind=FlowKind.INPUT, group=None) for box in inputs]
    kinds = {NodeKind.TENSOR: FlowKind.TENSOR}
    boxes += [
        FlowNode(id=node.id, kind=kinds.get(node.kind, FlowKind.OPERATOR), group=node.group) for node in graph.nodes
    ]
    shown: set[tuple[str, str]] = set()
    drawn: list[FlowEdge] = []
    for edge in edges:
        source = f"input.{edge.source}" if edge.from_input or edge.source in outside else edge.source
        label = (source, format_shape(edge.shape, Phase.PREFILL) if edge.shape is not None else "")
        labelled = not edge.residual and label not in shown
        if labelled:
            shown.add(label)
        drawn.append(
            FlowEdge(source=source, target=edge.target, shape=edge.shape, labelled=labelled, residual=edge.residual)
        )
    return Flow(nodes=tuple(boxes), edges=tuple(drawn))


def read_flow(graph: Graph) -> Flow:
    """The graph's data flow (see the module's docstring for how it is read)."""
    if graph.flow is not None:
        return traced_flow(graph, graph.flow)
    reader = _Reader(graph)
    top = graph.groups[0]
    scope = _Scope(group=top.id, parent=None)
    reader.walk(top, scope)
    reader.finish(scope)
    return Flow(nodes=tuple(reader.boxes), edges=tuple(reader.edges), labels=dict(reader.labels))
