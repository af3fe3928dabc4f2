"""The cost model's gated delta net and Mamba2 nodes against torch's FlopCounterMode and transformers' cache object.

Tiny Qwen3-Next, Qwen3.5 and Nemotron-H models (and Nemotron-3-Nano's released widths, cut to six layers) are built
on the meta device; the nodes of ``archviz.families.blocks.mixers`` are made from the sizes the meta stage reads off
each built mixer (``ModuleRecord.sizes``), and their FLOPs per layer are held to the FLOPs torch's counter charges to
the mixer module itself (its projections, norm and ``conv1d`` left out), their state bytes to the tensors the cache
holds for that layer after the decode step. Every expected number is the witness's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archviz.code.finder import find_site
from archviz.code.modeltree import ModuleRecord
from archviz.code.pins import RevisionKind, SourceFile
from archviz.cost.cache import cache_costs, layer_cache_bytes
from archviz.cost.pricers import node_costs
from archviz.cost.terms import Phase, Sizes, layer_flops
from archviz.families.blocks.builder import GraphBuilder, Scope, checkpoint_dtypes, layer_placement
from archviz.families.blocks.mixers import MixerNodes, gated_delta_nodes, mamba2_nodes
from archviz.graph.nodes import Graph, GroupKind, ModelInfo, OpKind
from archviz.inputs.config import parse_config
from archviz.inputs.settings import Settings
from archviz.transformers.meta import MetaModel, build_meta_model, instantiate_meta_module
from archviz.transformers.module_tree import read_module_tree
from archviz.transformers.witness import CostWitness, witness_cost
from archviz.verify.costcheck import compare_cost
from tests.cost.test_cost import CONFIGS as COST_CONFIGS
from tests.cost.test_cost import describe
from tests.generic.test_generic_moe import tiny_nemotron_h, tiny_qwen3_next
from tests.generic.test_released import tiny_qwen3_5

# (batch, prompt, context): a prompt shorter than the kernel (the cache pads it to the kernel: regression, the
# convolution's term counted T + kernel − 1 positions), one within a chunk, one past a 64-position chunk, one past two.
SIZES = ((1, 2, 3), (2, 5, 7), (1, 70, 12), (1, 130, 3))
RELEASED = Path(__file__).resolve().parents[1] / "data" / "released" / "nemotron-3-nano-30b-a3b" / "config.json"


def gated_delta(b: GraphBuilder, group: str, layers: list[int], module: ModuleRecord) -> MixerNodes:
    """The gated delta net's nodes, sized as the built ``…GatedDeltaNet`` is (its attribute -> the config key)."""
    sizes = module.sizes
    return gated_delta_nodes(
        Scope(b=b, group=group, placement=layer_placement(layers), prefix="linear-attention."),
        key_heads=(sizes["num_k_heads"], "linear_num_key_heads"),
        value_heads=(sizes["num_v_heads"], "linear_num_value_heads"),
        key_head_dim=(sizes["head_k_dim"], "linear_key_head_dim"),
        value_head_dim=(sizes["head_v_dim"], "linear_value_head_dim"),
        conv_kernel=(sizes["conv_kernel_size"], "linear_conv_kernel_dim"),
    )


def mamba2(b: GraphBuilder, group: str, layers: list[int], module: ModuleRecord) -> MixerNodes:
    """Mamba2's nodes, sized as the built ``…Mamba2Mixer`` is (its chunk from the config it holds)."""
    sizes = module.sizes
    return mamba2_nodes(
        Scope(b=b, group=group, placement=layer_placement(layers), prefix="mamba."),
        heads=(sizes["num_heads"], "mamba_num_heads"),
        head_dim=(sizes["head_dim"], "mamba_head_dim"),
        groups=(sizes["n_groups"], "n_groups"),
        state_size=(sizes["ssm_state_size"], "ssm_state_size"),
        conv_kernel=(sizes["conv_kernel_size"], "conv_kernel"),
        chunk=(module.config_sizes["chunk_size"], "chunk_size"),  # not in sizes: a length, not a width
    )


def released_nemotron() -> dict[str, Any]:
    """Nemotron-3-Nano's released config with its first six layers (three Mamba2, two MoE, one attention, which the
    cache needs to count positions): every width real."""
    config = json.loads(RELEASED.read_text())
    config.update(num_hidden_layers=6, hybrid_override_pattern=config["hybrid_override_pattern"][:6])
    return config


def small_chunks_nemotron() -> dict[str, Any]:
    """Chunks of 32, so the prompts cross up to five of them (the scan's chunk-pair term grows as their square)."""
    return {**tiny_nemotron_h(), "chunk_size": 32}


@dataclass(frozen=True)
class Case:
    config: Callable[[], dict[str, Any]]
    mixer_class: str
    """The end of the mixer's class name."""
    nodes: Callable[[GraphBuilder, str, list[int], ModuleRecord], MixerNodes]
    core: OpKind


CASES = {
    "qwen3-next": Case(tiny_qwen3_next, "GatedDeltaNet", gated_delta, OpKind.GATED_DELTA_RULE),
    "qwen3.5": Case(tiny_qwen3_5, "GatedDeltaNet", gated_delta, OpKind.GATED_DELTA_RULE),
    "nemotron-h": Case(small_chunks_nemotron, "Mamba2Mixer", mamba2, OpKind.SCAN),
    "nemotron-3-nano-released": Case(released_nemotron, "Mamba2Mixer", mamba2, OpKind.SCAN),
}


@dataclass(frozen=True)
class Built:
    meta: MetaModel
    mixers: dict[int, ModuleRecord]
    """The mixer module of each layer that has one."""
    graph: Graph
    nodes: MixerNodes


def layer_of(path: str) -> int:
    parts = path.split(".")
    return int(parts[parts.index("layers") + 1])


def build(case: Case) -> Built:
    config = case.config()
    text = config.get("text_config", config)
    settings = Settings(parse_config(json.dumps(text), display_path="config.json"), family="generic")
    # Built in the dtype the text config declares, as the pipeline builds it (Qwen3.5 declares it only there).
    meta = build_meta_model(
        config,
        model_type=config["model_type"],
        architecture=config["architectures"][0],
        dtype=settings.declared_dtype().name,
    )
    tree = read_module_tree(meta)
    mixers = {layer_of(m.path): m for m in tree.modules if m.class_name.endswith(case.mixer_class)}
    b = GraphBuilder(settings, dtype=checkpoint_dtypes(settings)[0], quantization_block=None)
    layers = sorted(mixers)
    group = b.group(
        "mixer", title="Mixer", kind=GroupKind.ATTENTION, summary="", parent=None, placement=layer_placement(layers)
    )
    nodes = case.nodes(b, group, layers, mixers[layers[0]])
    model = ModelInfo(
        name="tiny",
        model_type=config["model_type"],
        family="generic",
        transformers_model_type=config["model_type"],
        architecture=config["architectures"][0],
        repo=None,
        revision=None,
        config_path="config.json",
    )
    return Built(meta=meta, mixers=mixers, graph=b.finish(model, input_embedding=None), nodes=nodes)


@pytest.fixture(scope="module", params=sorted(CASES))
def built(request: pytest.FixtureRequest) -> tuple[Case, Built]:
    case = CASES[request.param]
    return case, build(case)


@pytest.fixture(scope="module")
def witnesses(built: tuple[Case, Built]) -> dict[tuple[int, int, int], CostWitness]:
    _, model = built
    return {
        sizes: witness_cost(model.meta.module, batch=sizes[0], prompt=sizes[1], context=sizes[2]) for sizes in SIZES
    }


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_mixer_flops_equal_what_torch_charges_the_mixer_itself(
    built: tuple[Case, Built], witnesses: dict[tuple[int, int, int], CostWitness], sizes: tuple[int, int, int]
) -> None:
    """The convolution and the recurrence or scan run in the mixer's own forward, so torch charges it their sum; the
    sizes tell them apart (the convolution grows with max(T, kernel), the rest with whole chunks; only the
    convolution, and Mamba2's state read, count in decode)."""
    case, model = built
    witness = witnesses[sizes]
    evaluated = Sizes(batch=sizes[0], prompt=sizes[1], context=sizes[2])
    costs = node_costs(model.graph)
    core = {node.id: node for node in model.graph.nodes}[model.nodes.core]
    assert core.op is not None and core.op.kind is case.core
    for layer, mixer in model.mixers.items():
        for phase, counted in ((Phase.PREFILL, witness.prefill.own), (Phase.DECODE, witness.decode.own)):
            analytic = sum(
                layer_flops(costs[node], layer, evaluated, phase)
                for node in (model.nodes.convolution, model.nodes.core)
            )
            assert analytic == counted[mixer.path] > 0, (layer, phase)
            # The convolution is the mixer's: conv1d only lends its weight, so torch charges it nothing.
            assert f"{mixer.path}.conv1d" not in counted


@pytest.mark.parametrize("sizes", SIZES, ids=lambda item: "B{}-T{}-S{}".format(*item))
def test_mixer_states_equal_the_cache_objects_tensors(
    built: tuple[Case, Built], witnesses: dict[tuple[int, int, int], CostWitness], sizes: tuple[int, int, int]
) -> None:
    _, model = built
    witness = witnesses[sizes]
    kept = layer_cache_bytes(cache_costs(model.graph, model.graph.dtype), witness.context + 1)
    for layer in model.mixers:
        held = [tensor for tensor in witness.cache if tensor.layer == layer]
        assert {tensor.name for tensor in held} == {"conv_states[0]", "recurrent_states[0]"}
        assert witness.batch * kept[layer] == sum(tensor.bytes for tensor in held) > 0
        # The recurrent state is float32 whatever the model's dtype, as the state node says.
        assert {tensor.dtype for tensor in held if tensor.name.startswith("recurrent")} == {"F32"}


@pytest.mark.parametrize(
    ("folder", "case"),
    [("qwen3_next", "qwen3-next"), ("qwen3_5_moe", "qwen3.5"), ("nemotron_h", "nemotron-h")],
)
def test_every_site_of_the_mixer_nodes_is_in_the_modeling_file(folder: str, case: str) -> None:
    import transformers

    path = Path(transformers.__file__).parent / "models" / folder / f"modeling_{folder}.py"
    source = SourceFile(
        path=path.name,
        text=path.read_text(encoding="utf-8"),
        revision="x",
        revision_kind=RevisionKind.CONTENT_HASH,
        url_template=None,
    )
    model = build(CASES[case])
    located = [node for node in model.graph.nodes if node.locate is not None]
    assert len(located) == 4
    for node in located:
        assert node.locate is not None
        missing = [site for site in node.locate.sites if not find_site(site, source)]
        assert missing == [], (node.id, missing)


def test_kdas_convolution_under_its_kernel_equals_torchs_count(tmp_path: Path) -> None:
    """Regression: KDA's prefill convolution counted T + kernel − 1 output positions for a prompt shorter than the
    kernel, where the cache pads the prompt to the kernel first; the whole Kimi Linear graph against the witness."""
    docs = describe(COST_CONFIGS["kimi-linear"], tmp_path / "model")
    module = instantiate_meta_module(docs.recipe)
    kernel = next(node for node in docs.graph.nodes if node.id == "kda.short-conv").parameters[0].shape[-1]
    witness = witness_cost(module, batch=2, prompt=kernel - 2, context=3)
    layers = len([layer for layer in docs.graph.layers if layer.part.value == "main"])
    check = compare_cost(docs.graph, witness, layers=layers, cache_dtype=docs.graph.dtype)
    assert [row for row in check.rows if not row.agrees] == [] and check.unclaimed == ()
