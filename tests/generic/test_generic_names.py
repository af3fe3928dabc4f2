"""The generic path names things by what they are: sizes by what structurally sizes them, nodes by role and place.

Issue 21: Qwen3.5-35B-A3B's ``k_proj`` width was labelled ``moe_intermediate_size`` (a config key that happens to be
512; it is 2 key-value heads of 256), and Gemma 4's vision tower had nodes titled `` (Gemma4VisionModel)`` and seven
projections all titled ``linear (Linear)``. Every model here goes through the generic path: the released configs it
reads (``tests/data/released/``) and tiny configs made by transformers' own config classes. The witness of a named
size is the real model transformers builds on the meta device, read here with torch, not through archviz's reader.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from itertools import product
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from archviz.graph.nodes import Dim, Graph, Node
from archviz.pipeline import describe_model

RELEASED = Path(__file__).parents[1] / "data" / "released"
READ_OFF_THE_CODE = ("gpt-oss-20b", "qwen3.5-35b-a3b", "minimax-m3")

# Small sizes for transformers' default configs, chosen so that no two of them, nor a head count times the head
# size, are equal: a name then cannot come from a coincidence of the tiny values.
TINY = {
    "hidden_size": 72,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 20,
    "moe_intermediate_size": 36,
    "shared_expert_intermediate_size": 52,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
}
GEMMA4_VISION = {
    "hidden_size": 48,
    "intermediate_size": 80,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 12,
    "use_clipped_linears": True,
    "standardize": True,
}
TINY_TYPES = ("qwen3_next", "gemma4", "nemotron_h", "phi3", "phi4_multimodal", "olmo3")


def tiny_config(model_type: str) -> dict[str, Any]:
    """transformers' default config of ``model_type`` at ``TINY`` sizes (its sub-configs too); Gemma 4 with a
    vision tower whose projections are clippable linears."""
    extra = {"vision_config": GEMMA4_VISION} if model_type == "gemma4" else {}
    document = transformers.AutoConfig.for_model(model_type, **extra).to_dict()

    def shrink(config: dict[str, Any]) -> None:
        for key, value in TINY.items():
            if isinstance(config.get(key), int):
                config[key] = value
        for sub in config.values():
            if isinstance(sub, dict) and "model_type" in sub and sub is not document.get("vision_config"):
                shrink(sub)

    shrink(document)
    return document


@pytest.fixture(scope="module")
def configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each model's config.json in a folder of its own: the released files byte for byte, the tiny ones written."""
    folders: dict[str, Path] = {}
    for name in READ_OFF_THE_CODE:
        folder = tmp_path_factory.mktemp(name)
        (folder / "config.json").write_bytes((RELEASED / name / "config.json").read_bytes())
        folders[name] = folder
    for model_type in TINY_TYPES:
        folder = tmp_path_factory.mktemp(model_type)
        (folder / "config.json").write_text(json.dumps(tiny_config(model_type), indent=2))
        folders[model_type] = folder
    return folders


@pytest.fixture(scope="module")
def graphs(configs: dict[str, Path]) -> dict[str, Graph]:
    built = {name: describe_model(str(folder)).graph for name, folder in configs.items()}
    assert {graph.model.family for graph in built.values()} == {"generic"}
    return built


def witness_model(folder: Path) -> torch.nn.Module:
    """The model transformers builds from ``folder`` on the meta device: the class ``architectures`` names, else
    the image-text Auto class for a wrapper with a text config, else the causal LM one."""
    config = transformers.AutoConfig.from_pretrained(folder)
    named = getattr(transformers, (config.architectures or [""])[0], None)
    with torch.device("meta"):
        if isinstance(named, type) and isinstance(config, named.config_class):
            return named(config)
        if "text_config" in type(config).sub_configs:
            return transformers.AutoModelForImageTextToText.from_config(config)
        return transformers.AutoModelForCausalLM.from_config(config)


def named_dims(node: Node) -> Iterator[Dim]:
    """The fixed sizes of a node's shapes that carry a name (not a plain number, not batch or positions)."""
    for shape in (*node.inputs, *node.outputs):
        for dim in shape.dims:
            if dim.value is not None and dim.label != "dim":
                yield dim


def readings(model: torch.nn.Module, part: str) -> set[int]:
    """What one factor of a derivation reads in the real model: ``Class.attribute`` on every module of that class,
    else a config key on every config a module holds (``text_config.`` in its text config)."""
    if part[:1].isupper() and "." in part:
        class_name, attribute = part.split(".", 1)
        return {
            value
            for module in model.modules()
            if type(module).__name__ == class_name
            for value in [getattr(module, attribute, None)]
            if isinstance(value, int)
        }
    prefix, _, key = part.rpartition(".")
    found: set[int] = set()
    for module in model.modules():
        config = getattr(module, "config", None)
        if isinstance(config, transformers.PretrainedConfig):
            config = config.get_text_config() if prefix == "text_config" else config
            value = getattr(config, key, None)
            if isinstance(value, int):
                found.add(value)
    return found


def evaluated(model: torch.nn.Module, formula: str) -> int:
    """A derivation with sums or quotients, each name replaced by the one value the real model reads for it."""

    def value(match: re.Match[str]) -> str:
        found = readings(model, match.group(0))
        assert len(found) == 1, (match.group(0), found)
        return str(found.pop())

    arithmetic = re.sub(r"[A-Za-z_][A-Za-z0-9_.]*", value, formula).replace("×", "*").replace("/", "//")
    result: int = eval(arithmetic, {"__builtins__": {}})  # digits and + - * // ( ) only, built just above
    return result


@pytest.mark.parametrize("name", [*READ_OFF_THE_CODE, *TINY_TYPES])
def test_titles_are_non_empty_and_unique(name: str, graphs: dict[str, Graph]) -> None:
    graph = graphs[name]
    titles = [node.title for node in graph.nodes]
    assert all(title.split(" (")[0].strip() for title in titles), titles
    assert [title for title, count in Counter(titles).items() if count > 1] == []


@pytest.mark.parametrize("name", [*READ_OFF_THE_CODE, *TINY_TYPES])
def test_every_named_size_is_what_the_built_model_says_sizes_it(
    name: str, graphs: dict[str, Graph], configs: dict[str, Path]
) -> None:
    """Each named size's name is its derivation's factors, and those factors, read off the real model, multiply to
    its value."""
    model = witness_model(configs[name])
    checked = 0
    for node in graphs[name].nodes:
        for dim in named_dims(node):
            if re.search(r"[+/()]", dim.formula or ""):  # a sum or a quotient (a convolution's channels) by its name
                assert dim.value == evaluated(model, dim.formula or ""), (node.id, dim)
                checked += 1
                continue
            parts = (dim.formula or "").split(" × ")
            # ``Class.attribute`` is named by the attribute, a config key (``text_config.vocab_size``) by itself.
            names = [part.split(".", 1)[1] if part[:1].isupper() else part for part in parts]
            assert dim.label.split("·") == names, (node.id, dim)
            assert set(dim.config_keys) <= {part.rsplit(".", 1)[-1] for part in parts}, (node.id, dim)
            choices = [readings(model, part) for part in parts]
            assert dim.value in {math.prod(pick) for pick in product(*choices)}, (node.id, dim, choices)
            checked += 1
    assert checked > 0


def test_qwen35_key_projection_is_key_value_heads_times_head_dim(graphs: dict[str, Graph]) -> None:
    # The bug: 512 was labelled moe_intermediate_size, the one config key of that value.
    graph = graphs["qwen3.5-35b-a3b"]
    document = json.loads((RELEASED / "qwen3.5-35b-a3b" / "config.json").read_text())["text_config"]
    assert document["moe_intermediate_size"] == document["num_key_value_heads"] * document["head_dim"] == 512
    (k_proj,) = [node for node in graph.nodes if node.id.endswith("self-attn.k-proj")]
    width = k_proj.outputs[0].dims[-1]
    assert (width.value, width.label) == (512, "num_key_value_heads·head_dim")
    # The head size is the attention module's own attribute; the head count its config's key.
    assert (width.formula, width.config_keys) == (
        "num_key_value_heads × Qwen3_5MoeAttention.head_dim",
        ("num_key_value_heads",),
    )
    assert [factor.name for factor in k_proj.parameters[0].factors] == ["num_key_value_heads·head_dim", "hidden_size"]
    # Nothing in the model is sized by that config key itself: the experts keep their width as an attribute.
    labels = {dim.label for node in graph.nodes for dim in named_dims(node)}
    labels |= {factor.name for node in graph.nodes for row in node.parameters for factor in row.factors}
    assert "moe_intermediate_size" not in labels
    (experts,) = [node for node in graph.nodes if node.id.endswith("mlp.experts")]
    assert {factor.name for row in experts.parameters for factor in row.factors} == {"hidden_dim", "intermediate_dim"}


def test_a_size_two_candidates_share_stays_a_number(graphs: dict[str, Graph]) -> None:
    # Qwen3.5's gated delta net keeps hidden_size and key_dim, both 2048: its input width is said as a number.
    graph = graphs["qwen3.5-35b-a3b"]
    (in_proj,) = [node for node in graph.nodes if node.id.endswith("linear-attn.in-proj-qkv")]
    width = in_proj.inputs[0].dims[-1]
    assert (width.value, width.label, width.config_keys) == (2048, "dim", ())


def test_gemma4_vision_tower_titles_say_role_and_place(graphs: dict[str, Graph]) -> None:
    titles = [node.title for node in graphs["gemma4"].nodes]
    # The standardisation buffers the vision model holds itself: titled by them, not by an empty name.
    assert "vision tower · std_bias, std_scale (Gemma4VisionModel)" in titles
    linears = sorted(title for title in titles if title.endswith("· linear (Linear)"))
    assert linears == sorted(
        f"vision tower · encoder · layer · {role} · {projection} proj · linear (Linear)"
        for role, projections in (("attention", "qkvo"), ("MLP", ("gate", "up", "down")))
        for projection in projections
    )


def test_gemma4_layers_with_another_attention_shape_are_numbered(graphs: dict[str, Graph]) -> None:
    # Its full-attention layers have wider heads than its sliding ones: the same module path, two nodes.
    document = tiny_config("gemma4")["text_config"]
    full = [i for i, kind in enumerate(document["layer_types"]) if kind == "full_attention"]
    titles = [node.title for node in graphs["gemma4"].nodes if node.title.endswith("· q_proj (Linear)")]
    numbered = [title for title in titles if title.startswith("language model · layers ")]
    assert len(titles) == len(numbered) == 2
    assert any(title.startswith(f"language model · layers {', '.join(map(str, full))} ·") for title in numbered)


def test_a_module_of_unknown_kind_says_so(graphs: dict[str, Graph]) -> None:
    gemma = {node.title: node for node in graphs["gemma4"].nodes}
    prefix = "vision tower · encoder · layer · attention · q proj · "
    clipped = gemma[f"{prefix}input_min, input_max, output_min, output_max (Gemma4ClippableLinear)"]
    assert clipped.summary.startswith("Of unknown kind: archviz does not recognise what a Gemma4ClippableLinear")
    qwen = {node.id: node for node in graphs["qwen3.5-35b-a3b"].nodes}
    gated = qwen["model.language-model.layers.linear-attn.norm"]
    assert gated.title.endswith("(Qwen3_5MoeRMSNormGated)")
    # Not a plain RMSNorm (it multiplies by its gate): said as the gated norm it is, not matched by a shorter suffix.
    assert gated.summary.startswith("Normalize") and "gate" in gated.summary
    # A module it does recognise says what it computes; a role it recognises names the role.
    assert qwen["model.language-model.layers.self-attn.k-proj"].summary.startswith("Multiply each vector")
    sinks = {node.id: node for node in graphs["gpt-oss-20b"].nodes}["model.layers.self-attn.sinks"]
    assert (
        sinks.summary == "Tensors the attention module GptOssAttention holds itself (sinks), used in its forward pass."
    )
    unknown = [node for graph in graphs.values() for node in graph.nodes if node.summary.startswith("Of unknown")]
    assert all(node.title.rsplit(" (", 1)[1].rstrip(")") in node.summary for node in unknown)


def test_a_fused_projection_width_is_a_number(graphs: dict[str, Graph]) -> None:
    # MiniMax-M3's shared experts fuse gate and up: 2 × 3,072 wide, which is also its MLP's 6,144 hidden_size.
    graph = graphs["minimax-m3"]
    (fused,) = [node for node in graph.nodes if node.id.endswith("shared-experts.gate-up-proj")]
    out, width = fused.outputs[0].dims[-1], fused.inputs[0].dims[-1]
    assert (out.value, out.label, width.value, width.label) == (6144, "dim", 6144, "hidden_size")
    # Its checkpoint rows (gate and up apart, or together) say their width as a number too.
    assert all(row.factors[0].name == str(row.shape[0]) for row in fused.parameters)
