"""The data flow of a graph read off the code is the traced forward's, never the modules' registration order.

Issue text: "the diagram chains modules in the order they were registered and draws that as data flow: Qwen3.5's
overview shows ``in_proj_qkv → in_proj_z → in_proj_b → in_proj_a → norm → out_proj`` and ``input_layernorm →
post_attention_layernorm``, edges no tensor travels". The expected edges below are read off transformers' modeling
code (``modeling_qwen3_5_moe.py``, ``modeling_gpt_oss.py``), each cited where it is asserted; the models are
transformers' own classes built on the meta device from tiny configs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from archviz.code.modeltree import CallKind, ShapeTrace
from archviz.graph.nodes import DataEdge, Graph
from archviz.pipeline import describe_model
from archviz.site.dataflow import read_flow
from archviz.transformers.tracing import trace_shapes
from tests.generic.test_generic_moe import tiny_gpt_oss
from tests.generic.test_released import tiny_qwen3_5

QWEN_LAYER = "model.language-model.layers."
GPT_OSS_LAYER = "model.layers."


def graph_for(config: dict[str, Any], tmp_path: Path) -> Graph:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return describe_model(str(folder)).graph


def pairs(graph: Graph, prefix: str, *, residual: bool | None = None) -> set[tuple[str, str]]:
    """The graph's traced edges as (source, target), the layer's node-id prefix cut off (``in-proj-qkv``)."""
    assert graph.flow is not None

    def short(id: str) -> str:
        return id.removeprefix(prefix)

    return {
        (short(edge.source), short(edge.target)) for edge in graph.flow if residual is None or edge.residual is residual
    }


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    return graph_for(tiny_qwen3_5(), tmp_path_factory.mktemp("qwen"))


def test_qwen3_5_moe_edges_are_the_tensors_its_forward_passes(qwen: Graph) -> None:
    edges = pairs(qwen, QWEN_LAYER)
    # The regression: registration order chained the projections and the two norms.
    for wrong in [
        ("linear-attn.in-proj-qkv", "linear-attn.in-proj-z"),
        ("linear-attn.in-proj-z", "linear-attn.in-proj-b"),
        ("linear-attn.in-proj-b", "linear-attn.in-proj-a"),
        ("input-layernorm", "post-attention-layernorm"),
    ]:
        assert wrong not in edges, wrong
    # Qwen3_5MoeGatedDeltaNet.forward: in_proj_qkv, in_proj_z, in_proj_b and in_proj_a each read hidden_states, the
    # decoder layer's input_layernorm output.
    for projection in ("in-proj-qkv", "in-proj-z", "in-proj-b", "in-proj-a"):
        assert ("input-layernorm", f"linear-attn.{projection}") in edges
    # causal_conv1d_fn(mixed_qkv, self.conv1d.weight…): the convolution reads in_proj_qkv's output and conv1d's
    # weight, and keeps its last positions; ``F.softplus(a.float() + self.dt_bias)``: g, from in_proj_a's output and
    # the module's own dt_bias, and beta, from in_proj_b's, go into the delta rule with the convolved q, k and v.
    assert {
        ("linear-attn.in-proj-qkv", "linear-attn.short-conv"),
        ("linear-attn.conv1d", "linear-attn.short-conv"),
    } <= edges
    assert ("linear-attn.short-conv", "linear-attn.conv-state") in edges
    assert {source for source, target in edges if target == "linear-attn.delta-rule"} == {
        "linear-attn.short-conv",
        "linear-attn.in-proj-a",
        "linear-attn.in-proj-b",
        "linear-attn.dt-bias",
    }
    assert ("linear-attn.delta-rule", "linear-attn.recurrent-state") in edges
    # self.norm(core_attn_out, z): the gated norm reads the core's output and z; out_proj reads the norm.
    assert {source for source, target in edges if target == "linear-attn.norm"} == {
        "linear-attn.delta-rule",
        "linear-attn.in-proj-z",
    }
    assert ("linear-attn.norm", "linear-attn.out-proj") in edges
    # Qwen3_5MoeAttention.forward: keys and values (k after its norm) through the cache into attention's core with
    # the normalised queries; q_proj's other half gates the core's output on its way to o_proj.
    assert {source for source, target in edges if target == "self-attn.attention-core"} == {
        "self-attn.q-norm",
        "self-attn.kv-cache",
    }
    assert {source for source, target in edges if target == "self-attn.o-proj"} == {
        "self-attn.attention-core",
        "self-attn.q-proj",
    }
    assert {source for source, target in edges if target == "linear-attn.out-proj"} == {"linear-attn.norm"}
    # Qwen3_5MoeDecoderLayer.forward: hidden_states = residual + hidden_states, then post_attention_layernorm.
    assert ("linear-attn.out-proj", "post-attention-layernorm") in edges
    assert ("self-attn.o-proj", "post-attention-layernorm") in edges
    assert pairs(qwen, QWEN_LAYER, residual=True) >= {("model.language-model.embed-tokens", "post-attention-layernorm")}
    # Qwen3_5MoeSparseMoeBlock.forward: shared_expert, gate, experts(hidden, selected_experts, routing_weights) and
    # shared_expert_gate all read the post-attention norm's output; the experts also read the router's choice.
    for target in ("mlp.gate", "mlp.experts", "mlp.shared-expert-gate", "mlp.shared-expert.gate-proj"):
        assert ("post-attention-layernorm", target) in edges
    assert ("mlp.gate", "mlp.experts") in edges
    # The MoE's sum and the residual stream reach the final norm; the stream is the residual edge.
    for source in ("mlp.experts", "mlp.shared-expert.down-proj", "mlp.shared-expert-gate"):
        assert (source, "model.language-model.norm") in pairs(qwen, QWEN_LAYER, residual=False)
    assert ("self-attn.o-proj", "model.language-model.norm") in pairs(qwen, QWEN_LAYER, residual=True)


def test_an_edge_between_layers_is_the_block_s_exit_and_entry(qwen: Graph) -> None:
    """Folded into one block: no edge runs from a layer's node back to the same block's input norm, and the block is
    entered from the embedding and left to the final norm."""
    edges = pairs(qwen, QWEN_LAYER)
    assert ("model.language-model.embed-tokens", "input-layernorm") in edges
    assert not {(source, target) for source, target in edges if target == "input-layernorm"} - {
        ("model.language-model.embed-tokens", "input-layernorm")
    }


def test_the_next_layer_s_input_norm_reads_the_residual_stream() -> None:
    """In the trace itself: layer 3's input_layernorm reads layer 0's output, which is the MoE's output added to the
    stream that carries the attention's output and the block's input (both residual)."""
    trace = _trace(tiny_qwen3_5())
    calls = trace.calls
    norm = next(call for call in calls if call.path == "model.language_model.layers.3.input_layernorm")
    [read] = norm.reads
    assert calls[read.source].path == "model.language_model.layers.0"
    returned = {(calls[item.source].path, item.residual) for item in calls[read.source].returns[0]}
    assert returned == {
        ("model.language_model.layers.0.mlp", False),
        ("model.language_model.layers.0.linear_attn", True),
        ("model.language_model.embed_tokens", True),
    }


def test_gpt_oss_edges(tmp_path: Path) -> None:
    graph = graph_for(tiny_gpt_oss(), tmp_path)
    edges = pairs(graph, GPT_OSS_LAYER)
    # GptOssAttention.forward: q_proj, k_proj, v_proj read the input norm's output.
    for projection in ("q-proj", "k-proj", "v-proj"):
        assert ("input-layernorm", f"self-attn.{projection}") in edges
    # eager_attention_forward: keys and values go through the cache, the sinks are concatenated to q·kᵀ inside
    # attention's core, and the softmax's probabilities times v go to o_proj.
    assert {("self-attn.k-proj", "self-attn.kv-cache"), ("self-attn.v-proj", "self-attn.kv-cache")} <= edges
    assert {source for source, target in edges if target == "self-attn.attention-core"} == {
        "self-attn.q-proj",
        "self-attn.kv-cache",
        "self-attn.sinks",
    }
    assert {source for source, target in edges if target == "self-attn.o-proj"} == {"self-attn.attention-core"}
    # GptOssMLP.forward: router_scores, router_indices = self.router(hidden_states); self.experts(hidden_states,
    # router_indices, router_scores).
    assert {("post-attention-layernorm", "mlp.router"), ("post-attention-layernorm", "mlp.experts")} <= edges
    assert ("mlp.router", "mlp.experts") in edges
    # The MLP returns (output, router_scores); the decoder layer keeps the first alone: the router's scores reach
    # the final norm only through the experts.
    assert ("mlp.router", "model.norm") not in edges
    assert ("mlp.experts", "model.norm") in edges


def test_an_output_the_forward_does_not_use_has_no_edge(
    qwen: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break the model: the MoE block still runs its shared expert (in the same order) but drops its output. Edges
    made by order would not notice; the traced ones lose exactly the shared expert's way to the stream."""
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe

    def without_shared_expert(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
        batch, positions, width = hidden_states.shape
        flat = hidden_states.view(-1, width)
        self.shared_expert(flat)
        _, routing_weights, selected_experts = self.gate(flat)
        output = self.experts(flat, selected_experts, routing_weights)
        self.shared_expert_gate(flat)
        return output.reshape(batch, positions, width)

    before = pairs(qwen, QWEN_LAYER)
    monkeypatch.setattr(modeling_qwen3_5_moe.Qwen3_5MoeSparseMoeBlock, "forward", without_shared_expert)
    after = pairs(graph_for(tiny_qwen3_5(), tmp_path), QWEN_LAYER)
    lost = {
        ("mlp.shared-expert.down-proj", "model.language-model.norm"),
        ("mlp.shared-expert-gate", "model.language-model.norm"),
    }
    assert lost <= before
    assert before - after == lost
    assert ("post-attention-layernorm", "mlp.shared-expert.gate-proj") in after  # it still runs and reads


def test_the_diagram_draws_the_traced_edges_and_leaves_unreached_nodes_unconnected(qwen: Graph) -> None:
    """Qwen3.5's vision tower does not run on text: its nodes are boxes with no edge, and the graph says so."""
    flow = read_flow(qwen)
    assert qwen.flow is not None
    drawn = {(edge.source.removeprefix("input."), edge.target, edge.residual) for edge in flow.edges}
    assert drawn == {(edge.source, edge.target, edge.residual) for edge in qwen.flow}
    connected = {end for edge in flow.edges for end in (edge.source, edge.target)}
    vision = [node.id for node in qwen.nodes if node.id.startswith("model.visual.")]
    assert vision and not connected.intersection(vision)
    assert any(f"{len(vision)} nodes are reached by no tensor" in note for note in qwen.notes)


class _Toy(nn.Module):
    """Views, an in-place write through a view, a keyword input, a module called twice, and an unused output."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)
        self.head = nn.Linear(4, 4)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        written = torch.zeros_like(x)  # holds none of x's values
        written.view(-1)[:] = self.first(x).reshape(-1)
        y = self.second(input=written)
        y = self.second(y)
        self.unused(x)
        return self.head(torch.relu(y) + 0)


def test_views_in_place_writes_keywords_and_repeated_calls() -> None:
    with torch.device("meta"):
        toy = _Toy()
    calls = trace_shapes(toy, record_flow=True).calls
    reads = [
        (call.path, sorted(calls[read.source].path for read in call.reads))
        for call in calls
        if call.kind is CallKind.MODULE and call.path
    ]
    assert reads == [
        ("embed", ["input_ids"]),
        ("first", ["embed"]),
        ("second", ["first"]),
        ("second", ["second"]),
        ("unused", ["embed"]),
        ("head", ["second"]),
    ]


class _ReadsValues(nn.Module):
    """A module that needs real data (``.cpu()``, as DeepSeek-V3's remote ``moe_infer`` calls), inside a model."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        counts = x.sum(dim=-1).cpu()  # no data on the meta device
        return self.proj(x) * counts.numel()


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.inner = _ReadsValues()
        self.head = nn.Linear(4, 4)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.inner(self.embed(input_ids)))


def test_an_operation_failing_under_the_flow_recorder_is_the_code_s() -> None:
    """Regression: ``.cpu()`` of a meta tensor, run through the flow recorder's function mode, was reported as an
    internal error of archviz (the mode's frame is the innermost Python frame) and stopped the pass; it is the code's
    need for real data, so the module is stood in for and the pass goes on."""
    with torch.device("meta"):
        model = _Outer()
    trace = trace_shapes(model, record_flow=True)
    assert trace.errors == ()
    assert [note.module for note in trace.not_executed] == ["inner"]
    assert not any(note.internal for note in trace.not_executed)
    assert "head" in trace.prefill


def test_a_stood_in_module_s_children_reading_its_input_are_traced() -> None:
    """A module that cannot run on meta tensors is stood in for, and its children whose first matrix reads vectors of
    its input's width are run on that input (a MoE's router and shared experts beside a dispatch that needs real data):
    their shapes and the flow into them are known."""
    with torch.device("meta"):
        model = _Outer()
    trace = trace_shapes(model, record_flow=True)
    assert trace.prefill["inner.proj"] == ((2, 5, 4),)
    reads = {call.path: [trace.calls[read.source].path for read in call.reads] for call in trace.calls}
    assert reads["inner.proj"] == ["embed"]


def _trace(config: dict[str, Any]) -> ShapeTrace:
    import transformers

    built = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = getattr(transformers, config["architectures"][0])(built)
    return trace_shapes(model, batch=3, prefill=7, past=4, skip_repeats=True, record_flow=True)


def test_graph_flow_is_node_ids_and_model_inputs(qwen: Graph) -> None:
    assert qwen.flow is not None
    ids = {node.id for node in qwen.nodes}
    for edge in qwen.flow:
        assert isinstance(edge, DataEdge)
        assert edge.target in ids
        assert edge.source in ids or (edge.from_input and edge.source == "input_ids"), edge
