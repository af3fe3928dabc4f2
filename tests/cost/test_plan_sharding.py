"""archviz plan's per-rank shapes, witnessed by transformers' own tensor parallelism.

Each tiny model is built on the meta device by transformers, its tensor-parallel plan resolved by transformers
(``_resolve_parallel_plans``) and applied with ``apply_tensor_parallelism`` through torch's DTensor, on a fake
process group (torch's ``fake`` backend and ``FakeStore``: no communication, one rank per initialisation) of world
size tp. Every parameter's local shard on every rank is compared with archviz's prediction for the checkpoint tensors
it is loaded from: a routed expert's gate and up projections make transformers' fused ``gate_up_proj``, its down
projection ``down_proj``.

Expert parallelism is witnessed the same way: transformers' resolved EP plan applied with
``apply_expert_parallelism`` on an (ep, tp) = (2, 1) mesh, each rank's experts compared with archviz's (transformers
refuses an uneven split, so the remainder rule is held to hand-derived counts in tests/cost/test_plan.py). The witnessed
convention is ``transformers``; the engine convention is engines', not transformers', and has no witness here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from transformers.distributed import DistributedConfig  # noqa: E402
from transformers.distributed.expert_parallel import apply_expert_parallelism  # noqa: E402
from transformers.distributed.tensor_parallel import apply_tensor_parallelism  # noqa: E402

from archviz.cost.gpus import GPUS  # noqa: E402
from archviz.cost.parallel_plans import Convention, restated_plans  # noqa: E402
from archviz.cost.plan import PlanRequest, local_shapes  # noqa: E402
from archviz.cost.sharding import Parallelism  # noqa: E402
from archviz.families.registry import Family  # noqa: E402
from archviz.graph.nodes import Graph  # noqa: E402
from archviz.graph.totals import predicted_manifest  # noqa: E402
from archviz.pipeline import describe_model  # noqa: E402
from archviz.transformers.configs import parallel_plans  # noqa: E402
from archviz.transformers.meta import instantiate_meta_module  # noqa: E402
from tests.generic.test_meta import FAMILY_CASES  # noqa: E402

_TINY_DECODER = {
    "vocab_size": 250,  # not a multiple of 4: the last rank's vocabulary slice is shorter
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 8,
    "max_position_embeddings": 128,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}

CASES: dict[str, tuple[dict[str, Any], int]] = {
    # Hand-written families: DeepSeek-V3 (Kimi-K2's), Kimi Linear, the llama-style decoders dense and MoE.
    "deepseek_v3": ({"model_type": "deepseek_v3", "rms_norm_eps": 1e-6, **FAMILY_CASES["deepseek_v3"][2]}, 4),
    "kimi_linear": ({"model_type": "kimi_linear", "rms_norm_eps": 1e-6, **FAMILY_CASES["kimi_linear"][2]}, 2),
    "llama": ({"model_type": "llama", **_TINY_DECODER}, 4),
    "qwen3_moe": (
        {
            "model_type": "qwen3_moe",
            **_TINY_DECODER,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 16,
        },
        2,
    ),
    # Two generic families (read off transformers' code), whose plans archviz reads off transformers' classes.
    "olmo2": ({"model_type": "olmo2", **_TINY_DECODER}, 4),
    "gpt_oss": ({"model_type": "gpt_oss", **FAMILY_CASES["gpt_oss"][2]}, 2),
}


def _describe(config: dict[str, Any], folder: Path) -> Any:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return describe_model(str(folder))


@pytest.fixture
def fake_group() -> Iterator[Any]:
    """Initialise torch.distributed's fake backend as rank ``rank`` of ``size``; torn down after the test."""

    def start(rank: int, size: int) -> Any:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", rank=rank, world_size=size, store=FakeStore())
        return init_device_mesh("cpu", (size,))

    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


def paired_name(graph: Graph, family: Family, name: str) -> str:
    """The transformers parameter a checkpoint tensor is loaded into (a routed expert's: the fused one)."""
    spellings = graph.naming.segment_renames()
    down = family.speaks.moe.projections[2] if family.speaks.moe is not None else "down_proj"
    parts = [spellings.get(part, part) for part in name.split(".")]
    if "experts" in parts and parts[parts.index("experts") + 1].isdigit():
        at = parts.index("experts")
        return ".".join(parts[: at + 1]) + (".down_proj" if parts[at + 2] == down else ".gate_up_proj")
    return ".".join(parts)


def transformers_names(
    graph: Graph, family: Family, predicted: dict[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """archviz's per-checkpoint-tensor shapes as transformers' parameters: module spellings applied, each layer's
    routed experts fused into ``gate_up_proj`` (E, gate + up rows, in) and ``down_proj`` (E, out, in)."""
    spellings = graph.naming.segment_renames()
    moe = family.speaks.moe
    gate, up, down = moe.projections if moe is not None else ("", "", "")
    fused: dict[str, dict[int, dict[str, tuple[int, ...]]]] = {}
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in predicted.items():
        parts = [spellings.get(part, part) for part in name.split(".")]
        if "experts" in parts and parts[parts.index("experts") + 1].isdigit() and parts[-1] == "weight":
            at = parts.index("experts")
            prefix = ".".join(parts[: at + 1])
            fused.setdefault(prefix, {}).setdefault(int(parts[at + 1]), {})[parts[at + 2]] = shape
            continue
        out[".".join(parts)] = shape
    for prefix, experts in fused.items():
        count = len(experts)
        first = experts[min(experts)]
        out[f"{prefix}.gate_up_proj"] = (count, first[gate][0] + first[up][0], first[gate][1])
        out[f"{prefix}.down_proj"] = (count, *first[down])
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_local_shard_is_archvizs_prediction(case: str, tmp_path: Path, fake_group: Any) -> None:
    config, tp = CASES[case]
    docs = _describe(config, tmp_path / case)
    model_type = docs.graph.model.transformers_model_type
    plans = restated_plans(docs.graph, docs.family) or parallel_plans(model_type)
    assert plans is not None, f"transformers ships no TP plan for {model_type}"
    request = PlanRequest(
        gpu=GPUS["h100"], parallelism=Parallelism(tp=tp), plans=plans, convention=Convention.TRANSFORMERS
    )
    for rank in range(tp):
        mesh = fake_group(rank, tp)
        module = instantiate_meta_module(docs.recipe)
        tp_plan, _ep_plan, _fsdp = module._resolve_parallel_plans(DistributedConfig(tp_size=tp))
        apply_tensor_parallelism(module, mesh, tp_plan)
        witnessed = {
            name: tuple((param.to_local() if isinstance(param, DTensor) else param).shape)
            for name, param in module.named_parameters()
        }
        local = local_shapes(docs.graph, docs.family, request, rank)
        predicted = transformers_names(docs.graph, docs.family, local)
        missing = sorted(set(witnessed) - set(predicted))
        # A parameter loaded under another name (Kimi Linear's KDA: transformers' conversion mapping fuses
        # q/k/v_conv1d into conv1d and moves f_a/f_b_proj under forget_gate) cannot be paired by name: transformers
        # must leave it whole, and archviz must predict every tensor it does not pair whole as well.
        split_missing = [name for name in missing if isinstance(dict(module.named_parameters())[name], DTensor)]
        assert split_missing == [], f"{case} rank {rank}: transformers splits parameters archviz does not pair"
        whole = {tensor.name: tensor.shape for tensor in predicted_manifest(docs.graph)}
        unpaired = {
            name: shape for name, shape in local.items() if paired_name(docs.graph, docs.family, name) not in witnessed
        }
        assert all(whole[name] == shape for name, shape in unpaired.items()), (case, rank, unpaired)
        assert not missing or unpaired, f"{case}: transformers parameters {missing} pair with no archviz tensor"
        differing = {
            name: (witnessed[name], predicted[name])
            for name in witnessed
            if name in predicted and witnessed[name] != predicted[name]
        }
        assert differing == {}, f"{case} rank {rank}: (transformers, archviz) local shapes differ: {differing}"
        sharded = [name for name, param in module.named_parameters() if isinstance(param, DTensor)]
        assert sharded, f"{case}: transformers sharded nothing, so nothing was witnessed"


EP_CASES = ("deepseek_v3", "kimi_linear", "qwen3_moe", "gpt_oss")


@pytest.mark.parametrize("case", EP_CASES)
def test_every_ranks_experts_are_archvizs_prediction(case: str, tmp_path: Path, fake_group: Any) -> None:
    config, _tp = CASES[case]
    docs = _describe(config, tmp_path / case)
    model_type = docs.graph.model.transformers_model_type
    plans = restated_plans(docs.graph, docs.family) or parallel_plans(model_type)
    ep = 2
    request = PlanRequest(
        gpu=GPUS["h100"], parallelism=Parallelism(tp=1, dp=ep, ep=ep), plans=plans, convention=Convention.TRANSFORMERS
    )
    for rank in range(ep):
        fake_group(rank, ep)
        mesh = init_device_mesh("cpu", (ep, 1), mesh_dim_names=("ep", "tp"))
        module = instantiate_meta_module(docs.recipe)
        _tp_plan, ep_plan, _fsdp = module._resolve_parallel_plans(
            DistributedConfig(tp_size=1, ep_size=ep, fsdp_size=ep)
        )
        apply_expert_parallelism(module, mesh["ep"], mesh["tp"], ep_plan)
        witnessed = {
            name: tuple((param.to_local() if isinstance(param, DTensor) else param).shape)
            for name, param in module.named_parameters()
        }
        local = local_shapes(docs.graph, docs.family, request, rank)
        predicted = transformers_names(docs.graph, docs.family, local)
        differing = {
            name: (witnessed[name], predicted.get(name))
            for name, param in module.named_parameters()
            if isinstance(param, DTensor) and witnessed[name] != predicted.get(name)
        }
        assert differing == {}, f"{case} rank {rank}: (transformers, archviz) local shapes differ: {differing}"
        assert any(isinstance(param, DTensor) for _, param in module.named_parameters()), case
        # A checkpoint storing experts apart: rank r holds the r-th run of them, as DTensor's Shard(0) cuts the fused
        # tensor (a fused checkpoint's are compared by shape above).
        held = sorted({int(found.group(1)) for name in local if (found := re.search(r"\.experts\.(\d+)\.", name))})
        if held:
            assert held == list(range(rank * len(held), (rank + 1) * len(held))), (case, rank, held)
