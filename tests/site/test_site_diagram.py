"""The data-flow diagram: the flow read off each family's graph (edges, residuals, the MoE fan-out, the KDA inputs),
every node drawn or carried by an edge, Graphviz's SVG deterministic, both phases' shapes, and nothing but drawing
elements in it whatever the strings say."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from archviz.graph.nodes import Graph
from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import describe_model
from archviz.site.dataflow import Flow, FlowEdge, FlowKind, input_roles, read_flow
from archviz.site.diagram import DiagramLinks, _check, diagram_svg
from tests.families.test_families import PUBLISHED, TINY

K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
LINKS = DiagramLinks(node=lambda node: f"nodes/{node}.html", group=lambda group: f"#group-{group}")
SVG = "{http://www.w3.org/2000/svg}"


def graph_of(name: str, tmp_path: Path) -> Graph:
    if name in BUNDLED:
        return describe_model(name).graph
    folder = tmp_path / name
    folder.mkdir()
    config = PUBLISHED.get(name) or TINY[name]
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return describe_model(str(folder)).graph


def edges(flow: Flow) -> set[tuple[str, str]]:
    return {(edge.source, edge.target) for edge in flow.edges}


@pytest.mark.parametrize("name", [K2, KIMI_LINEAR, "kimi-k3", *PUBLISHED, *TINY])
def test_every_node_is_a_box_or_labels_an_edge_and_every_operator_is_connected(name: str, tmp_path: Path) -> None:
    graph = graph_of(name, tmp_path)
    flow = read_flow(graph)
    boxes = {box.id for box in flow.nodes}
    carried = {edge.tensor for edge in flow.edges if edge.tensor}
    for node in graph.nodes:
        assert node.id in boxes or node.id in carried, node.id
    by_id = {node.id: node for node in graph.nodes}
    for box in flow.nodes:  # nothing floats but a bare parameter (attention sinks) or a graph of one box
        node = by_id.get(box.id)
        bare = node is not None and not node.inputs and not node.outputs
        linked = any(box.id in (edge.source, edge.target) for edge in flow.edges)
        assert linked or bare or len(flow.nodes) == 1, box.id
    reads = {edge.target for edge in flow.edges}
    for node in graph.nodes:
        if node.inputs and node.id not in MADE_INSIDE.get(name, ()):
            assert node.id in reads, f"{node.id} reads nothing"


MADE_INSIDE = {"bert-base-uncased": {"bert.embeddings.token-type-embeddings", "bert.embeddings.position-embeddings"}}
"""Nodes of a traced flow whose module reads only a tensor the model makes itself: BERT's forward, given no
``token_type_ids`` or ``position_ids``, reads slices of its own buffers (``BertEmbeddings.token_type_ids``,
``position_ids``), which no node or input produces."""


def test_k2_flow_has_residuals_and_the_moe_fan_out(tmp_path: Path) -> None:
    flow = read_flow(graph_of(K2, tmp_path))
    found = edges(flow)
    residuals = {(edge.source, edge.target) for edge in flow.edges if edge.residual}
    assert residuals == {("residual-stream", "attention-residual"), ("attention-residual", "ffn-residual")}
    assert {
        ("post-attention-norm", "moe.router"),
        ("moe.router", "moe.scores"),
        ("moe.scores", "moe.selection"),
        ("moe.selection", "moe.routed-expert"),
        ("post-attention-norm", "moe.routed-expert"),
        ("post-attention-norm", "moe.shared-expert"),
        ("moe.routed-expert", "moe.combine"),
        ("moe.combine", "moe.sum"),
        ("moe.shared-expert", "moe.sum"),
        ("moe.sum", "ffn-residual"),
        ("mlp.down-proj", "ffn-residual"),  # the dense MLP of layer 0 is the alternative
        ("ffn-residual", "final-norm"),
        ("rotary-embedding", "attention.apply-rotary"),
        ("input.input_ids", "token-embedding"),
    } <= found
    labels = {edge.tensor: (edge.source, edge.target) for edge in flow.edges if edge.tensor and edge.labelled}
    assert labels["embedded-state"] == ("token-embedding", "residual-stream")
    assert labels["moe.router-logits"] == ("moe.router", "moe.scores")
    assert {box.id for box in flow.nodes if box.kind is FlowKind.TENSOR} == {"residual-stream", "logits-float32"}


def test_kimi_linear_flow_reads_the_kda_inputs_by_role(tmp_path: Path) -> None:
    graph = graph_of(KIMI_LINEAR, tmp_path)
    delta = next(node for node in graph.nodes if node.id == "kda.delta-rule")
    assert input_roles(delta) == ("query", "key", "value", "g", "beta")
    flow = read_flow(graph)
    into_delta = [edge.source for edge in flow.edges if edge.target == "kda.delta-rule"]
    assert into_delta == ["kda.qkv-split"] * 3 + ["kda.forget-gate", "kda.beta"]
    found = edges(flow)
    assert {(f"kda.{x}-proj", "kda.short-conv") for x in "qkv"} <= found
    assert {("kda.o-proj", "attention-residual"), ("attention.o-proj", "attention-residual")} <= found
    states = {box.id for box in flow.nodes if box.kind is FlowKind.TENSOR}
    assert {"kda.conv-state", "kda.recurrent-state"} <= states


def test_llama_flow_is_a_chain_with_two_residuals(tmp_path: Path) -> None:
    flow = read_flow(graph_of("llama-3.1-8b", tmp_path))
    assert sum(edge.residual for edge in flow.edges) == 2
    assert {
        ("attention.q-proj", "attention.head-split"),
        ("attention.sdpa", "attention.o-proj"),
        ("mlp.gate-proj", "mlp.act"),
        ("mlp.up-proj", "mlp.act"),
        ("lm-head", "logits"),
    } <= edges(flow)


def _svg(text: str) -> ET.Element:
    return ET.fromstring(text)


def test_diagram_is_deterministic_and_carries_both_phases(tmp_path: Path) -> None:
    graph = graph_of(K2, tmp_path)
    first, second = diagram_svg(graph, LINKS), diagram_svg(graph, LINKS)
    assert first == second
    root = _svg(first)
    prefill = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "phase-prefill"]
    decode = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "phase-decode"]
    assert len(prefill) == len(decode) > 10
    assert "[B, T, 7168 d]" in prefill and "[B, 1, 7168 d]" in decode
    assert root.get("width") and not root.get("width", "").endswith("pt")
    hrefs = {a.get("{http://www.w3.org/1999/xlink}href") for a in root.iter(f"{SVG}a")}
    assert {f"nodes/{node.id}.html" for node in graph.nodes} <= hrefs
    assert "#group-moe.experts" in hrefs


def test_hostile_strings_stay_text_in_the_diagram(tmp_path: Path) -> None:
    graph = graph_of(K2, tmp_path)
    hostile = '<script>alert(1)</script>&amp;"\\N <img src=x onerror=alert(1)>'
    nodes = tuple(dataclasses.replace(node, title=hostile, summary=hostile) for node in graph.nodes)
    groups = tuple(dataclasses.replace(group, title=hostile) for group in graph.groups)
    graph = dataclasses.replace(graph, nodes=nodes, groups=groups, model=dataclasses.replace(graph.model, name=hostile))
    root = _svg(diagram_svg(graph, LINKS))  # _check ran inside
    tags = {element.tag.removeprefix(SVG) for element in root.iter()}
    assert "script" not in tags and "img" not in tags
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert any("<script>alert(1)</script>&amp;" in text for text in texts)


@pytest.mark.parametrize(
    "svg",
    [
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><g onload="alert(1)"></g></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><foreignObject></foreignObject></svg>',
    ],
)
def test_check_refuses_anything_but_drawing(svg: str) -> None:
    with pytest.raises(ValueError):
        _check(ET.fromstring(svg))


def test_diagram_links_resolve_for_any_page(tmp_path: Path) -> None:
    """A compare page gets a model's diagram from its graph alone, with links relative to where it sits."""
    graph = graph_of("llama-3.1-8b", tmp_path)
    card: Callable[[str], str] = lambda node: f"../llama/nodes/{node}.html"  # noqa: E731
    svg = diagram_svg(graph, DiagramLinks(node=card, group=lambda group: f"../llama/index.html#group-{group}"))
    assert 'xlink:href="../llama/nodes/attention.sdpa.html"' in svg


def test_a_card_shows_its_sublayer_as_a_diagram_with_the_node_marked(tmp_path: Path) -> None:
    from archviz.site import ModelContext, ModelIndex, build_card_view

    docs = describe_model(K2)
    index = ModelIndex(docs, K2, ModelContext())
    expert = build_card_view(index, index.nodes["moe.routed-expert"])
    assert expert.context_title == "Mixture of experts ×60 (layers 1–60)"
    root = _svg(expert.context_svg)
    marked = [g.get("id") for g in root.iter(f"{SVG}g") if "current" in (g.get("class") or "").split()]
    assert marked == ["dfg-n-moe.routed-expert"]
    ids = {g.get("id") for g in root.iter(f"{SVG}g")}
    assert "dfg-n-moe.shared-expert" in ids and "dfg-n-attention.sdpa" not in ids
    assert 'xlink:href="../../kimi-k2-instruct/nodes/moe.router.html"' in expert.context_svg
    residual = build_card_view(index, index.nodes["attention-residual"])  # block level: the overview shows it
    assert residual.context_svg == "" and residual.context_title == ""


def test_no_page_of_the_site_repeats_an_element_id() -> None:
    """Every page of the committed site (kept equal to ``archviz render`` by test_site_sync) gives each element id once:
    a tensor state drawn as a box (the float32 logits) keeps its id there, and the edge into it takes another."""
    from html.parser import HTMLParser

    class Ids(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.ids: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.ids.extend(value for name, value in attrs if name == "id" and value is not None)

    site = Path(__file__).parents[2] / "site"
    repeated = {}
    for page in sorted(site.rglob("*.html")):
        parser = Ids()
        parser.feed(page.read_text(encoding="utf-8"))
        twice = sorted({ident for ident in parser.ids if parser.ids.count(ident) > 1})
        if twice:
            repeated[str(page.relative_to(site))] = twice
    assert len(list(site.rglob("*.html"))) > 100
    assert repeated == {}


# -- issue 23: a connected diagram with named dimensions and attention's inputs by role ------------------------


def reachable_from_inputs(flow: Flow) -> set[str]:
    """Every box a model input reaches along the edges (a state's link to its operator counts both ways)."""
    reached = {box.id for box in flow.nodes if box.kind is FlowKind.INPUT}
    frontier = list(reached)
    while frontier:
        current = frontier.pop()
        for edge in flow.edges:
            ends = [(edge.source, edge.target)]
            if edge.state:
                ends.append((edge.target, edge.source))
            for source, target in ends:
                if source == current and target not in reached:
                    reached.add(target)
                    frontier.append(target)
    return reached


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_box_of_a_bundled_diagram_is_reached_from_a_model_input(name: str, tmp_path: Path) -> None:
    """Kimi-K2.5's diagram was three pieces: nothing left the patch merge, the projector began at a loose input and
    its image features led nowhere, the 2-D rotary embedding had no edge."""
    flow = read_flow(graph_of(name, tmp_path))
    linked = {end for edge in flow.edges for end in (edge.source, edge.target)}
    assert [box.id for box in flow.nodes if box.id not in linked] == []
    assert [box.id for box in flow.nodes if box.id not in reachable_from_inputs(flow)] == []


def test_kimi_k25_vision_tower_feeds_the_projector_and_the_decoder(tmp_path: Path) -> None:
    """The forward's order (modeling_kimi_k25.py): ``rotary_emb`` over ``grid_thw``'s rows and columns feeds every
    layer's attention, ``temporal_merge``'s ``pooled_hidden_states`` is ``mm_projector``'s input, and
    ``inputs_embeds.masked_scatter(image_mask, image_embeds)`` puts the image features in before the decoder."""
    flow = read_flow(graph_of("kimi-k2.5", tmp_path))
    assert {
        ("input.grid_thw", "vision.rotary-embedding"),
        ("vision.rotary-embedding", "vision.attention.apply-rotary"),
        ("vision.attention.apply-rotary", "vision.attention.core"),
        ("vision.patch-merge", "projector.pre-norm"),
        ("projector.out-proj", "image-scatter"),
        ("token-embedding", "image-scatter"),
        ("image-scatter", "residual-stream"),
    } <= edges(flow)
    inputs = {box.id for box in flow.nodes if box.kind is FlowKind.INPUT}
    assert inputs == {"input.pixel_values", "input.grid_thw", "input.input_ids", "input.position_ids"}
    carried = {edge.tensor: (edge.source, edge.target) for edge in flow.edges if edge.tensor and edge.labelled}
    assert carried["projector.image-features"] == ("projector.out-proj", "image-scatter")
    # ``hidden_states = hidden_states + self.attn(self.norm1(hidden_states), ...)``: the skip carries the stream, not
    # the normalized copy the attention reads.
    vision_residuals = {(e.source, e.target) for e in flow.edges if e.residual and e.target.startswith("vision.")}
    assert vision_residuals == {
        ("vision.position-embedding", "vision.attention-residual"),
        ("vision.attention-residual", "vision.mlp-residual"),
    }
    assert not {("vision.attention-norm", "vision.attention-residual"), ("vision.mlp-norm", "vision.mlp-residual")} & (
        edges(flow)
    )


def edge_texts(svg: str, flow: Flow) -> list[tuple[FlowEdge, list[str], str, str]]:
    """Each labelled edge of the SVG with its lines: (edge, heading lines, prefill shape, decode shape)."""
    root = _svg(svg)
    by_element: dict[str, FlowEdge] = {f"dfg-e-{index}": edge for index, edge in enumerate(flow.edges)}
    for edge in flow.edges:  # an edge carrying a tensor state takes the state's id (once)
        if edge.labelled and edge.tensor and edge.tensor != edge.source:
            by_element.setdefault(f"dfg-n-{edge.tensor}", edge)
    found = []
    for group in root.iter(f"{SVG}g"):
        if "flow" not in (group.get("class") or "").split():
            continue
        texts = list(group.iter(f"{SVG}text"))
        if not texts:
            continue
        prefill = [t.text or "" for t in texts if t.get("class") == "phase-prefill"]
        decode = [t.text or "" for t in texts if t.get("class") == "phase-decode"]
        heading = [t.text or "" for t in texts if t.get("class") is None]
        shape = [t.text or "" for t in texts if t.get("class") is None and (t.text or "").startswith("[")]
        edge = by_element[str(group.get("id"))]
        found.append((edge, [h for h in heading if h not in shape], *(prefill or shape), *(decode or shape)))
    return found


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_edge_label_names_each_fixed_dimension(name: str, tmp_path: Path) -> None:
    """``[B, T, 12288]`` became ``[B, T, 12288 heads·qk_head_dim]``: every axis the graph's Shape names is named on
    the edge, in both phases (only the symbolic ones, ``B``, ``T``, ``P``, stay letters)."""
    graph = graph_of(name, tmp_path)
    flow = read_flow(graph)
    labelled = edge_texts(diagram_svg(graph, LINKS, flow=flow), flow)
    assert len(labelled) == sum(edge.labelled and edge.shape is not None for edge in flow.edges)
    long_names = 0
    for edge, _, prefill, decode in labelled:
        assert edge.shape is not None
        for dim in edge.shape.dims:
            if dim.value is not None and dim.label:
                assert f"{dim.value} {dim.label}" in prefill and f"{dim.value} {dim.label}" in decode, (prefill, dim)
                long_names += len(dim.label) > 8
    assert long_names > 0 or name == "kimi-k3"  # the names the edges used to drop are there


@pytest.mark.parametrize(
    ("name", "cores"),
    [
        (K2, ["attention.sdpa"]),
        ("kimi-k2.5", ["vision.attention.core", "attention.sdpa"]),
        (KIMI_LINEAR, ["kda.delta-rule", "attention.sdpa"]),
    ],
)
def test_edges_into_attention_cores_say_query_key_value(name: str, cores: list[str], tmp_path: Path) -> None:
    graph = graph_of(name, tmp_path)
    flow = read_flow(graph)
    for core in cores:
        into = [edge for edge in flow.edges if edge.target == core]
        assert [edge.role for edge in into if edge.role] == ["query", "key", "value"], core
    shown = {
        (edge.source, edge.target, tuple(heading))
        for edge, heading, _, _ in edge_texts(diagram_svg(graph, LINKS, flow=flow), flow)
        if edge.target in cores
    }
    roles = sorted(heading for _, _, heading in shown if heading)  # g and beta, into KDA, have no role
    assert roles == sorted([("query",), ("key",), ("value",)] * len(cores)), shown
    other_roles = {edge.role for edge in flow.edges if edge.target not in cores}
    assert other_roles == {None}  # the MLA's apply-rotary reads q and k, but it is no core
