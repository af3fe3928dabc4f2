"""The typed graph and its arithmetic: acceptance numbers, invariants, manifests, bad configs."""

from __future__ import annotations

import ast
import json
import math
import operator
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from archviz.common.errors import InputError
from archviz.graph.nodes import NodeKind, Part
from archviz.graph.shapes import Phase, format_shape
from archviz.graph.totals import TensorRole, compute_totals, node_parameters, predicted_manifest
from archviz.inputs.resolve import BUNDLED
from archviz.pipeline import ModelDocs, describe_model
from archviz.present.numbers import setting_value_text

DATA = Path(__file__).parents[1] / "data"
CONFIGS = [*BUNDLED, str(DATA / "deepseek-v3.config.json"), str(DATA / "moonlight-16b-a3b.config.json")]


@pytest.fixture(scope="module")
def k2() -> ModelDocs:
    return describe_model("kimi-k2-instruct")


def by_id(docs: ModelDocs, id: str):  # type: ignore[no-untyped-def]
    return next(node for node in docs.graph.nodes if node.id == id)


def test_k2_acceptance_numbers(k2: ModelDocs) -> None:
    assert k2.totals.parameters == 1_026_408_209_408
    assert k2.totals.buffers == 23_040
    embedding = by_id(k2, "token-embedding")
    assert node_parameters(embedding) == 1_174_405_120
    assert embedding.placement.count == 1
    assert format_shape(by_id(k2, "embedded-state").outputs[0]) == "[B batch, T positions, 7168 d]"
    assert format_shape(by_id(k2, "embedded-state").outputs[0], Phase.DECODE) == "[B batch, 1 positions, 7168 d]"
    expert = by_id(k2, "moe.routed-expert")
    assert node_parameters(expert) == 44_040_192
    assert expert.placement.count == 23_040
    assert [row.tensor.rsplit(".", 2)[-2] for row in expert.parameters] == ["gate_proj", "up_proj", "down_proj"]
    assert [row.shape for row in expert.parameters] == [(2048, 7168), (2048, 7168), (7168, 2048)]


def test_k2_active_parameters(k2: ModelDocs) -> None:
    # Every routed expert but top-8 of 384 in each of the 60 MoE layers is inactive for a token.
    inactive = 60 * (384 - 8) * 44_040_192
    assert k2.totals.active_parameters == k2.totals.parameters - inactive
    assert k2.totals.active_parameters_without_embedding == k2.totals.active_parameters - 1_174_405_120


@pytest.mark.parametrize("name", CONFIGS)
def test_node_parameters_sum_to_the_total(name: str) -> None:
    docs = describe_model(name)
    main = sum(node_parameters(n) * n.placement.count for n in docs.graph.nodes if n.part is Part.MAIN)
    mtp = sum(node_parameters(n) * n.placement.count for n in docs.graph.nodes if n.part is Part.MTP)
    assert main == docs.totals.parameters
    assert mtp == docs.totals.mtp_parameters
    assert all(n.kind is not NodeKind.TENSOR or not n.parameters for n in docs.graph.nodes)


@pytest.mark.parametrize("name", CONFIGS)
def test_predicted_manifest_agrees_with_totals(name: str) -> None:
    docs = describe_model(name)
    manifest = predicted_manifest(docs.graph)
    names = [tensor.name for tensor in manifest]
    assert len(names) == len(set(names)), "a checkpoint name is predicted twice"
    elements: Counter[str] = Counter()
    for tensor in manifest:
        elements[tensor.dtype] += math.prod(tensor.shape)
    assert dict(elements) == docs.totals.by_dtype
    weights = sum(math.prod(t.shape) for t in manifest if t.role == TensorRole.WEIGHT and t.part is Part.MAIN)
    # A packed-quantized weight's weight_packed stands for the logical weight's parameters (Kimi-K2.5's INT4 experts).
    packed = [t for t in manifest if t.role == TensorRole.PACKED and t.part is Part.MAIN]
    assert weights + sum(t.logical for t in packed) == docs.totals.parameters
    assert sum(t.logical for t in packed) == docs.totals.quantized_parameters


def test_k2_fp8_manifest_layout(k2: ModelDocs) -> None:
    manifest = {tensor.name: tensor for tensor in predicted_manifest(k2.graph)}
    expert = manifest["model.layers.60.mlp.experts.383.down_proj.weight"]
    assert (expert.shape, expert.dtype) == ((7168, 2048), "F8_E4M3")
    scale = manifest["model.layers.60.mlp.experts.383.down_proj.weight_scale_inv"]
    assert (scale.shape, scale.dtype, scale.role) == ((56, 16), "F32", TensorRole.SCALE)
    assert manifest["model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv"].shape == (5, 56)
    assert manifest["model.layers.0.mlp.down_proj.weight_scale_inv"].shape == (56, 144)
    bias = manifest["model.layers.1.mlp.gate.e_score_correction_bias"]
    assert (bias.shape, bias.dtype, bias.role) == ((384,), "F32", TensorRole.BUFFER)
    for unquantized in (
        "model.embed_tokens.weight",
        "lm_head.weight",
        "model.norm.weight",
        "model.layers.1.mlp.gate.weight",
        "model.layers.1.input_layernorm.weight",
        "model.layers.1.self_attn.kv_a_layernorm.weight",
    ):
        assert manifest[unquantized].dtype == "BF16"
        assert unquantized + "_scale_inv" not in manifest
    assert "model.layers.0.mlp.gate.e_score_correction_bias" not in manifest  # layer 0 is dense
    assert not any(name.startswith("model.layers.61.") for name in manifest)  # no MTP layer in K2


def test_deepseek_v3_mtp_is_reported_apart() -> None:
    docs = describe_model(str(DATA / "deepseek-v3.config.json"))
    # transformers' own DeepseekV3ForCausalLM on the meta device counts 671,026,404,352 for this config.
    assert docs.totals.parameters == 671_026_404_352
    assert docs.totals.mtp_parameters == 13_463_426_048
    assert docs.totals.buffers == 58 * 256
    manifest = {tensor.name: tensor for tensor in predicted_manifest(docs.graph)}
    for name in ("enorm", "hnorm", "eh_proj", "embed_tokens", "shared_head.norm", "shared_head.head"):
        assert manifest[f"model.layers.61.{name}.weight"].part is Part.MTP
    assert manifest["model.layers.61.mlp.experts.255.up_proj.weight_scale_inv"].part is Part.MTP
    assert "model.layers.62.enorm.weight" not in manifest


def test_moonlight_uses_q_proj_without_query_lora() -> None:
    docs = describe_model(str(DATA / "moonlight-16b-a3b.config.json"))
    ids = {node.id for node in docs.graph.nodes}
    assert "attention.q-proj" in ids and "attention.q-a-proj" not in ids
    assert docs.totals.parameters == 15_960_108_544  # = transformers' meta model
    shared = by_id(docs, "moe.shared-expert")
    assert shared.parameters[0].shape == (2 * 1408, 2048)


def test_tied_embeddings_count_once(write_config: Callable[..., Path]) -> None:
    untied = describe_model(str(write_config(name="untied")))
    tied = describe_model(str(write_config({"tie_word_embeddings": True}, name="tied")))
    assert tied.totals.parameters == untied.totals.parameters - 1_174_405_120
    head = by_id(tied, "lm-head")
    assert head.shares_parameters_with == "token-embedding" and not head.parameters
    assert "lm_head.weight" not in {tensor.name for tensor in predicted_manifest(tied.graph)}


def test_moe_layer_frequency_follows_the_remote_code_rule(write_config: Callable[..., Path]) -> None:
    docs = describe_model(str(write_config({"moe_layer_freq": 2})))
    assert by_id(docs, "moe.router").placement.layers == tuple(range(2, 61, 2))
    assert by_id(docs, "mlp.gate-proj").placement.layers == (0, *range(1, 61, 2))


def test_every_node_is_complete(k2: ModelDocs) -> None:
    ids = [node.id for node in k2.graph.nodes] + [group.id for group in k2.graph.groups]
    assert len(ids) == len(set(ids))
    for node in k2.graph.nodes:
        assert node.id.replace(".", "").replace("-", "").isalnum() and node.id == node.id.lower()
        assert node.title and node.code and node.summary.endswith(".")
        assert node.outputs, node.id
        if node.kind is NodeKind.TENSOR:
            assert len(node.outputs) == 1 and not node.inputs
        else:
            assert node.inputs, node.id
        if node.kind is NodeKind.LEARNED:
            assert node.parameters or node.shares_parameters_with
    members = [member for group in k2.graph.groups for member in group.members]
    assert sorted(members) == sorted(
        i for i in ids if i != "model"
    )  # every node and group but the model sits in exactly one group


def test_forward_order(k2: ModelDocs) -> None:
    order = [node.id for node in k2.graph.nodes]
    expected = [
        "token-embedding",
        "embedded-state",
        "input-norm",
        "attention.q-a-proj",
        "attention.kv-a-proj",
        "attention.sdpa",
        "attention.o-proj",
        "attention-residual",
        "post-attention-norm",
        "mlp.gate-proj",
        "moe.router",
        "moe.routed-expert",
        "moe.shared-expert",
        "ffn-residual",
        "final-norm",
        "lm-head",
        "logits-float",
    ]
    positions = [order.index(id) for id in expected]
    assert positions == sorted(positions)


def test_settings_carry_the_config_numbers(k2: ModelDocs) -> None:
    sdpa = {s.name: s for s in by_id(k2, "attention.sdpa").settings}
    # transformers' DeepseekV3Attention.scaling for K2: 192^-0.5 × (0.1 × ln 32 + 1)^2.
    assert float(sdpa["softmax scale"].value) == pytest.approx(0.1308608, rel=1e-5)
    # Typed until shown: a count is an int, a factor a float, a flag a bool; the card and the JSON say them as text.
    rotary = {s.name: s.value for s in by_id(k2, "rotary-embedding").settings}
    assert rotary == {
        "base θ": 50000.0,
        "scaling": "YaRN",
        "context factor": 32.0,
        "original context": 4096,
        "β fast / β slow": (1.0, 1.0),
        "mscale / mscale_all_dim": (1.0, 1.0),
    }
    shown = ("context factor", "original context", "β fast / β slow")
    assert [setting_value_text(rotary[name]) for name in shown] == ["32", "4,096", "1 / 1"]
    weights = {s.name: s.value for s in by_id(k2, "moe.routing-weights").settings}
    assert weights == {"normalize top-k": True, "routed scaling factor": 2.827}
    assert {name: setting_value_text(value) for name, value in weights.items()} == {
        "normalize top-k": "true",
        "routed scaling factor": "2.827",
    }
    assert "rope_scaling.factor" in by_id(k2, "rotary-embedding").config_keys


@pytest.mark.parametrize(
    ("change", "drop", "message", "line_key"),
    [
        ({"hidden_size": 0}, (), "hidden_size: expected a positive integer, got 0", "hidden_size"),
        ({"n_routed_experts": -4}, (), "n_routed_experts: expected a positive integer, got -4", "n_routed_experts"),
        (
            {"kv_lora_rank": "512"},
            (),
            "kv_lora_rank: expected a positive integer, got the string '512'",
            "kv_lora_rank",
        ),
        (
            {"num_attention_heads": 64.0},
            (),
            "num_attention_heads: expected a positive integer, got 64.0",
            "num_attention_heads",
        ),
        ({"vocab_size": 10**12}, (), "vocab_size: 1000000000000 is not a plausible dimension", "vocab_size"),
        (
            {"num_experts_per_tok": 400},
            (),
            "num_experts_per_tok: top-k 400 is larger than n_routed_experts (384)",
            "num_experts_per_tok",
        ),
        (
            {"first_k_dense_replace": 62},
            (),
            "first_k_dense_replace: is larger than num_hidden_layers (61)",
            "first_k_dense_replace",
        ),
        ({"n_group": 5}, (), "n_group: n_routed_experts (384) is not divisible by n_group (5)", "n_group"),
        (
            {},
            ("hidden_size", "vocab_size", "kv_lora_rank"),
            "missing keys required by the deepseek_v3 family: vocab_size, hidden_size, kv_lora_rank",
            None,
        ),
        (
            {"model_type": "no_such_model", "architectures": ["NoSuchModel"]},
            (),
            "model_type 'no_such_model' is not a supported architecture",
            "model_type",
        ),
    ],
)
def test_bad_configs_name_file_and_line(
    write_config: Callable[..., Path],
    change: dict[str, object],
    drop: tuple[str, ...],
    message: str,
    line_key: str | None,
) -> None:
    folder = write_config(change, drop=drop)
    config = folder / "config.json"
    with pytest.raises(InputError) as caught:
        describe_model(str(folder))
    assert caught.value.message.startswith(message)
    assert caught.value.location.path == str(config)
    if line_key is None:
        assert caught.value.location.line is None
    else:
        lines = config.read_text().splitlines()
        assert f'"{line_key}"' in lines[caught.value.location.line - 1]  # type: ignore[operator]


def test_graph_building_does_not_import_torch() -> None:
    code = (
        "import sys, json\n"
        "from archviz.pipeline import describe_model\n"
        "from archviz.present.json_documents import graph_json\n"
        "docs = describe_model('kimi-k2-instruct')\n"
        "json.dumps(graph_json(docs.graph, docs.totals))\n"
        "print(sorted(m for m in ('torch', 'transformers', 'safetensors.torch') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_totals_are_recomputed_from_the_graph(k2: ModelDocs) -> None:
    assert compute_totals(k2.graph) == k2.totals
    assert json.loads(json.dumps(k2.totals.by_dtype)) == k2.totals.by_dtype


KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"


def test_kimi_linear_acceptance_numbers() -> None:
    docs = describe_model(KIMI_LINEAR)
    # = transformers' KimiLinearForCausalLM on the meta device (tests/generic/test_meta.py builds it).
    assert docs.totals.parameters == 49_122_675_072
    assert docs.totals.buffers == 6_656
    mixers = Counter(layer.mixer for layer in docs.graph.layers)
    assert mixers == {"KDA": 20, "MLA": 7}
    assert [layer.index + 1 for layer in docs.graph.layers if layer.mixer == "MLA"] == [4, 8, 12, 16, 20, 24, 27]
    assert [layer.ffn for layer in docs.graph.layers[:2]] == ["dense", "MoE"]
    state = by_id(docs, "kda.recurrent-state")
    assert format_shape(state.outputs[0]) == "[B batch, 32 kda_heads, 128 kda_head_dim, 128 kda_head_dim]"
    assert state.placement.count == 20
    conv = by_id(docs, "kda.short-conv")
    assert [row.shape for row in conv.parameters] == [(4096, 1, 4)] * 3
    assert by_id(docs, "attention.o-proj").placement.count == 7
    ids = {node.id for node in docs.graph.nodes}
    assert "rotary-embedding" not in ids and "attention.apply-rotary" not in ids  # mla_use_nope
    manifest = {tensor.name: tensor for tensor in predicted_manifest(docs.graph)}
    assert manifest["model.layers.1.block_sparse_moe.experts.255.w2.weight"].shape == (2304, 1024)
    assert manifest["model.layers.0.self_attn.A_log"].shape == (1, 1, 32, 1)
    assert "model.layers.3.self_attn.q_conv1d.weight" not in manifest  # layer 4 (1-based) is MLA


@pytest.mark.parametrize(
    ("linear", "message"),
    [
        ({"kda_layers": [1, 2, 3, 5, 99]}, "linear_attn_config.kda_layers: layers [99] are outside 1–27"),
        ({"kda_layers": [1, 2, 3, 4]}, "linear_attn_config.kda_layers: layers [4] are both KDA and full attention"),
        ({"kda_layers": [1, 2]}, "linear_attn_config: layers [3, 5, 6"),
        ({"kda_layers": "all"}, "linear_attn_config.kda_layers: expected a list of 1-based layer numbers"),
    ],
)
def test_kimi_linear_layer_lists_are_checked(
    write_config: Callable[..., Path], linear: dict[str, object], message: str
) -> None:
    config = json.loads((Path(__file__).parents[2] / "archviz" / "bundled" / KIMI_LINEAR / "config.json").read_text())
    config["linear_attn_config"].update(linear)
    folder = write_config(text=json.dumps(config, indent=2))
    with pytest.raises(InputError) as caught:
        describe_model(str(folder))
    assert caught.value.message.startswith(message)
    assert caught.value.location.line is not None


def test_ue8m0_scales_are_predicted_f32_and_said(tmp_path: Path) -> None:
    """Issue 22: DeepSeek-V3.1's ``scale_fmt: ue8m0`` was accepted without a word. It says the scales' values are
    powers of two; DeepSeek-V3.1's release stores them as F32, which is predicted, and the reading is listed."""
    config = json.loads((DATA / "deepseek-v3.config.json").read_text())
    config["quantization_config"]["scale_fmt"] = "ue8m0"
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    docs = describe_model(str(tmp_path))
    plain = describe_model(str(DATA / "deepseek-v3.config.json"))
    assert docs.totals.by_dtype == plain.totals.by_dtype and "F32" in docs.totals.by_dtype
    scales = {t.dtype for t in predicted_manifest(docs.graph) if t.name.endswith("weight_scale_inv")}
    assert scales == {"F32"}
    (said,) = [item for item in docs.graph.assumptions if item.key == "quantization_config.scale_fmt"]
    assert "F8_E8M0" in said.source and "DeepSeek-V3#961" in said.source
    assert not any(item.key == "quantization_config.scale_fmt" for item in plain.graph.assumptions)


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _evaluate(node: ast.AST, values: dict[str, int]) -> int:
    """A formula's value: ``+``, ``-`` and ``×`` of config keys and numbers, with Python's precedence."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name | ast.Attribute | ast.Subscript):
        return values[ast.unparse(node)]
    raise AssertionError(f"not arithmetic: {ast.unparse(node)}")


def _config_numbers(settings: dict[str, object], prefix: str = "") -> dict[str, int]:
    found: dict[str, int] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            found.update(_config_numbers(value, f"{prefix}{key}."))
        elif isinstance(value, int) and not isinstance(value, bool):
            found[f"{prefix}{key}"] = value
        elif isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            found.update({f"{prefix}{key}[{index}]": item for index, item in enumerate(value)})  # a [2, 2] kernel
    return found


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_calculation_reads_as_it_is_computed(name: str) -> None:
    """Each parameter row's formula, as the cards and ``inspect --json`` print it, evaluated with the config's values
    and the usual precedence, is the row's element count: ``num_attention_heads × qk_nope_head_dim + qk_rope_head_dim
    × q_lora_rank`` once printed a product that reads as a sum (issue 43)."""
    docs = describe_model(name)
    # The model's own keys bare (a wrapper's text_config), the document's others by their path (vision_config.…).
    config = {**_config_numbers(dict(docs.config.data)), **_config_numbers(dict(docs.config.settings))}
    checked = 0
    for node in docs.graph.nodes:
        for row in node.parameters:
            formula = " × ".join(factor.term for factor in row.factors)
            # A factor the config does not name as a number (a key holding a list) stands for its own value.
            values = {**config, **{factor.name: factor.value for factor in row.factors if factor.name not in config}}
            tree = ast.parse(formula.replace("×", "*").replace("−", "-"), mode="eval").body
            assert _evaluate(tree, values) == row.elements, (node.id, formula)
            checked += 1
    assert checked > 0
