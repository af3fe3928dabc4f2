"""The data-flow diagram as a Mermaid ``flowchart``: what a model card on the Hub, a wiki or a slide tool renders.

It is drawn from the same reading of the graph as the site's SVG diagram (``archviz.site.dataflow.read_flow``):
the same boxes (learned ones with their parameters), the same edges labelled with the prefill shape, residual
connections dotted, groups as nested subgraphs titled with their multiplicity and layers. Mermaid lays it out
itself, so only the structure is the site's, not the positions.

Every label is a quoted Mermaid string with the characters Mermaid or HTML would read written as Mermaid's entity
codes (``#quot;``, ``#35;``, ``#lt;``), so no name can end a string, open a tag, start a Markdown string or close
the code fence a model card puts the diagram in. Box ids are ``n0``, ``n1``, … and subgraph ids ``g0``, …: no
graph id reaches Mermaid's syntax.
"""

from __future__ import annotations

from collections.abc import Iterator

from archviz.graph.nodes import Graph, Group, NodeKind
from archviz.graph.shapes import Phase
from archviz.site.dataflow import Flow, FlowEdge, FlowKind, FlowNode, drawn_members, read_flow
from archviz.site.diagram import compact_shape, edge_heading, group_label, parameters_note

_ENTITIES = {
    "#": "#35;",  # first: the codes below start with it
    '"': "#quot;",
    "&": "#amp;",
    "<": "#lt;",
    ">": "#gt;",
    "`": "#96;",  # a string opening with a backtick is Markdown; three would close a card's code fence
    "%": "#37;",  # ``%%{init: …}%%`` is a directive wherever it appears in the text
    "{": "#123;",
    "}": "#125;",
}
_LINE_BREAK = "<br/>"
"""A break between a label's lines: the only markup a label holds, and archviz's own."""


def mermaid_text(text: str) -> str:
    """``text`` as a quoted Mermaid string: one line, every character Mermaid or HTML would read as an entity code."""
    lines = []
    for line in text.splitlines() or [""]:
        escaped = "".join(_ENTITIES.get(char, char) for char in line if char.isprintable())
        lines.append(escaped)
    return '"' + _LINE_BREAK.join(lines) + '"'


class _Writer:
    """Writes one graph's flow in the graph's own order, so the same graph gives the same text."""

    def __init__(self, graph: Graph, flow: Flow):
        self.graph = graph
        self.flow = flow
        self.nodes = {node.id: node for node in graph.nodes}
        self.ids = {box.id: f"n{index}" for index, box in enumerate(flow.nodes)}
        self.group_ids = {group.id: f"g{index}" for index, group in enumerate(graph.groups)}

    def text(self) -> str:
        lines = ["flowchart TB"]
        lines += [f"  {self.box(box)}" for box in self.flow.nodes if box.group is None]
        if self.graph.groups:
            lines += self.body(self.graph.groups[0], "  ")
        lines += [f"  {self.edge(edge)}" for edge in self.flow.edges]
        return "\n".join(lines) + "\n"

    def body(self, group: Group, indent: str) -> Iterator[str]:
        for member in drawn_members(self.graph, self.flow, group):
            if isinstance(member, FlowNode):
                yield indent + self.box(member)
            else:
                yield from self.subgraph(member, indent)

    def subgraph(self, group: Group, indent: str) -> Iterator[str]:
        yield f"{indent}subgraph {self.group_ids[group.id]}[{mermaid_text(group_label(group))}]"
        yield f"{indent}  direction TB"
        yield from self.body(group, indent + "  ")
        yield f"{indent}end"

    def box(self, box: FlowNode) -> str:
        ident = self.ids[box.id]
        if box.kind is FlowKind.INPUT:
            return f"{ident}[/{mermaid_text(box.id.removeprefix('input.'))}/]"
        node = self.nodes[box.id]
        if node.kind is NodeKind.LEARNED:
            return f"{ident}[{mermaid_text(node.title + chr(10) + parameters_note(node))}]"
        if node.kind is NodeKind.TENSOR:
            return f"{ident}[({mermaid_text(node.title)})]"
        return f"{ident}({mermaid_text(node.title)})"

    def edge(self, edge: FlowEdge) -> str:
        arrow = "-.-" if edge.state else "-.->" if edge.residual else "-->"
        label = ""
        if edge.labelled and edge.shape is not None:
            tensor = self.nodes.get(edge.tensor or "")
            shape = compact_shape(edge.shape, Phase.PREFILL)
            heading = edge_heading(edge, tensor)
            text = f"{heading}\n{shape}" if heading else shape
            label = f"|{mermaid_text(text)}|"
        return f"{self.ids[edge.source]} {arrow}{label} {self.ids[edge.target]}"


def mermaid_flowchart(graph: Graph, *, flow: Flow | None = None) -> str:
    """The graph's data flow as a Mermaid ``flowchart`` (prefill shapes on the edges)."""
    return _Writer(graph, flow if flow is not None else read_flow(graph)).text()
