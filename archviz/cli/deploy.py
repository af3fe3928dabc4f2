"""``cost`` and ``plan``: what a model costs to run, and whether it fits on GPUs."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from archviz.cli.app import (
    AssumeOption,
    FromCodeOption,
    ModelArgument,
    PartialOption,
    Reading,
    ReadTrustOption,
    RevisionOption,
    _assumptions,
    _config_heads,
    _describe,
    _fail,
    _stdout,
)
from archviz.common.errors import InputError, doing
from archviz.cost import MAX_BATCH, MAX_POSITIONS

if TYPE_CHECKING:  # the pipeline and rich are imported by the commands that use them, not by `archviz --help`
    from archviz.graph.nodes import Assumption, Graph


MAX_RANKS = 2**20
"""Most GPUs, or ranks of one kind, ``plan`` takes (``--gpus``, ``--tp``, ``--ep``, ``--pp``, ``--dp``); a plan's work
is bounded further by ``archviz.cost.plan.MAX_RANK_GROUPS``."""
GPU_MEMORY_RANGE = (0.001, 65_536)
"""GiB ``--gpu-memory`` takes (the GPUs listed have 22 to 288)."""
BANDWIDTH_RANGE = (0.001, 1_000)
"""TB/s ``--bandwidth`` takes (the GPUs listed have 3.35 to 8)."""
THROUGHPUT_RANGE = (0.001, 1_000_000)
"""TFLOP/s ``--bf16``, ``--fp8`` and ``--fp4`` take (the GPUs listed have up to 10,066, FP4)."""


def cost(
    model: ModelArgument,
    prompt: Annotated[
        int, typer.Option("--prompt", min=1, max=MAX_POSITIONS, help="Prompt length T of the prefill.")
    ] = 2048,
    context: Annotated[
        int, typer.Option("--context", min=0, max=MAX_POSITIONS, help="Cached positions S when decoding.")
    ] = 131_072,
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_BATCH, help="Sequences B.")] = 1,
    cache_dtype: Annotated[
        str | None, typer.Option("--cache-dtype", help="dtype of the cache (bfloat16, float8_e4m3fn, ...).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the costs as JSON (schema in the README).")] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    from_code: FromCodeOption = False,
    trust_remote_code: ReadTrustOption = False,
) -> None:
    """What MODEL costs to run: FLOPs for a prompt and per decoded token, weight bytes, cache and state bytes."""
    from archviz.cost.cache import cache_dtype_name
    from archviz.cost.report import beyond_context, model_cost
    from archviz.cost.terms import Sizes
    from archviz.present.costs_report import cost_json, render_cost
    from archviz.present.jsontext import json_text

    try:
        reading = Reading(revision, assume, partial, from_code=from_code, trust_remote_code=trust_remote_code)
        docs = _describe(model, reading)
        dtype = cache_dtype_name(cache_dtype) if cache_dtype is not None else None
    except InputError as error:
        raise _fail(error) from None
    sizes = Sizes(batch=batch, prompt=prompt, context=context)
    report = model_cost(docs.graph, docs.totals, sizes, cache_dtype=dtype)
    beyond = beyond_context(sizes, docs.config) if report.priced else ()  # weights alone do not depend on T or S
    if as_json:
        document = cost_json(report, docs.graph, docs.totals, beyond=beyond)
        sys.stdout.write(json_text(document))
        return
    _stdout().print(render_cost(model, report, docs.graph, docs.totals, beyond=beyond))


def _gpu(
    name: str | None,
    memory: float | None,
    bandwidth: float | None,
    bf16: float | None,
    fp8: float | None,
    fp4: float | None,
) -> Any:
    """The table's GPU with the user's figures over it, or a GPU of the user's figures alone."""
    from dataclasses import replace

    from archviz.cost.gpus import Gpu, gpu_named

    if name is None:
        if memory is None or bandwidth is None or bf16 is None:
            raise InputError("name a GPU (--gpu h200) or give --gpu-memory, --bandwidth and --bf16", path="--gpu")
        base = Gpu(
            key="custom",
            title="your GPU",
            memory=0,
            bandwidth=0,
            bf16=0,
            fp8=None,  # unknown unless --fp8 gives it: never a zero to divide by
            fp4=None,
            interconnect=None,
            source="the command line",
        )
    else:
        base = gpu_named(name)
    for option, value, (least, most) in (
        ("--gpu-memory", memory, GPU_MEMORY_RANGE),
        ("--bandwidth", bandwidth, BANDWIDTH_RANGE),
        ("--bf16", bf16, THROUGHPUT_RANGE),
        ("--fp8", fp8, THROUGHPUT_RANGE),
        ("--fp4", fp4, THROUGHPUT_RANGE),
    ):
        if value is not None and not least <= value <= most:  # also refuses nan, which compares false
            raise InputError(f"must be a number from {least:g} to {most:,}", path=f"{option} {value:g}")
    changed: dict[str, Any] = {}
    if memory is not None:
        changed["memory"] = int(memory * 2**30)
        changed["memory_note"] = f"{memory:g} GiB, --gpu-memory"
    if bandwidth is not None:
        changed["bandwidth"] = int(bandwidth * 10**12)
    for key, value in (("bf16", bf16), ("fp8", fp8), ("fp4", fp4)):
        if value is not None:
            changed[key] = int(value * 10**12)
    if changed:
        changed["source"] = f"{base.source}; the command line for {', '.join(sorted(changed))}"
    return replace(base, **changed)


def plan(
    model: ModelArgument,
    gpu: Annotated[str | None, typer.Option("--gpu", help="h100, h200, b200, gb200, mi300x, mi325x or mi355x.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, max=MAX_RANKS, help="GPUs in all: tp × pp × dp.")] = None,
    tp: Annotated[
        int | None,
        typer.Option("--tp", min=1, max=MAX_RANKS, help="Tensor-parallel ranks (default: gpus / (pp × dp))."),
    ] = None,
    ep: Annotated[int, typer.Option("--ep", min=1, max=MAX_RANKS, help="Expert-parallel ranks: 1 or tp × dp.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, max=MAX_RANKS, help="Pipeline stages.")] = 1,
    dp: Annotated[int, typer.Option("--dp", min=1, max=MAX_RANKS, help="Data-parallel replicas.")] = 1,
    redundant_experts: Annotated[
        int,
        typer.Option(
            "--redundant-experts",
            min=0,
            max=MAX_RANKS,
            help="Redundant copies of routed experts per MoE layer over the EP ranks (EP may then exceed the experts).",
        ),
    ] = 0,
    context: Annotated[
        int, typer.Option("--context", min=0, max=MAX_POSITIONS, help="Cached positions S per sequence.")
    ] = 131_072,
    prompt: Annotated[
        int, typer.Option("--prompt", min=1, max=MAX_POSITIONS, help="Prompt length T of the prefill bound.")
    ] = 2048,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch", min=1, max=MAX_BATCH, help="Sequences per replica of the decode bound (default: those that fit)."
        ),
    ] = None,
    cache_dtype: Annotated[
        str | None, typer.Option("--cache-dtype", help="dtype of the cache (bf16, fp8, ...).")
    ] = None,
    compute: Annotated[
        str | None,
        typer.Option("--compute", help="Throughput of the bounds: bf16, fp8 or fp4 (default: the weights')."),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="Whose startup arithmetic sizes the memory for weights and cache: vllm, sglang, or none (--reserve).",
        ),
    ] = "vllm",
    memory_fraction: Annotated[
        float | None,
        typer.Option(
            "--memory-fraction",
            min=0.01,
            max=1.0,
            help="The engine's fraction: vLLM's --gpu-memory-utilization, SGLang's --mem-fraction-static.",
        ),
    ] = None,
    reserve: Annotated[
        float | None,
        typer.Option(
            "--reserve",
            min=0.0,
            max=0.99,
            help="With --engine none: the share of each GPU's memory kept back (default 0.10).",
        ),
    ] = None,
    convention: Annotated[
        str,
        typer.Option(
            "--convention",
            help="engine (as vLLM and SGLang split attention and MLA) or transformers (its own TP/EP plans).",
        ),
    ] = "engine",
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="Plan the release as if stored quantized: fp8, int4, nvfp4 or mxfp4 (a release that is not already).",
        ),
    ] = None,
    gpu_memory: Annotated[float | None, typer.Option("--gpu-memory", help="Memory per GPU, GiB.")] = None,
    bandwidth: Annotated[float | None, typer.Option("--bandwidth", help="HBM bandwidth per GPU, TB/s.")] = None,
    bf16: Annotated[float | None, typer.Option("--bf16", help="Dense BF16 TFLOP/s per GPU.")] = None,
    fp8: Annotated[float | None, typer.Option("--fp8", help="Dense FP8 TFLOP/s per GPU.")] = None,
    fp4: Annotated[float | None, typer.Option("--fp4", help="Dense FP4 TFLOP/s per GPU.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON (archviz.plan/1, in the README).")
    ] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
) -> None:
    """Will MODEL fit: each GPU's weights under TP, EP and PP, the sequences that fit at a context, and lower bounds
    on a decode step and a prefill. Exit 2 for a plan the model cannot run or whose weights do not fit; weights
    that fit with no room for a sequence at the context are reported (0 sequences), not refused."""
    from archviz.cost.cache import cache_dtype_name
    from archviz.cost.engines import Engine
    from archviz.cost.parallel_plans import Convention
    from archviz.cost.plan import DEFAULT_RESERVE, PlanRequest, plan_deployment
    from archviz.cost.sharding import Parallelism
    from archviz.cost.weight_formats import WEIGHT_FORMATS
    from archviz.pipeline import describe_model
    from archviz.present.jsontext import json_text
    from archviz.present.plan_report import plan_json, render_plan
    from archviz.transformers.configs import model_parallel_plans

    device = _gpu(gpu, gpu_memory, bandwidth, bf16, fp8, fp4)
    if convention not in tuple(Convention):
        raise InputError(f"--convention must be one of {', '.join(Convention)}", path=f"--convention {convention}")
    if engine not in tuple(Engine):
        raise InputError(f"--engine must be one of {', '.join(Engine)}", path=f"--engine {engine}")
    if reserve is not None and engine != Engine.NONE:
        raise InputError("--reserve applies with --engine none (an engine sizes its own memory)", path="--reserve")
    if memory_fraction is not None and engine == Engine.NONE:
        raise InputError(
            "--memory-fraction is an engine's (vllm, sglang); --engine none takes --reserve", path="--memory-fraction"
        )
    if compute is not None and compute not in ("bf16", "fp8", "fp4"):
        raise InputError("--compute must be bf16, fp8 or fp4", path=f"--compute {compute}")
    if tp is None:
        total = gpus if gpus is not None else pp * dp
        if total % (pp * dp):
            raise InputError(f"--gpus {total} is not a multiple of pp × dp = {pp * dp}", path=f"--gpus {total}")
        tp = total // (pp * dp)
    if gpus is not None and gpus != tp * pp * dp:
        raise InputError(f"--gpus {gpus} is not tp × pp × dp = {tp * pp * dp}", path=f"--gpus {gpus}")
    assumptions = _assumptions(assume)
    if weights is not None:
        assumptions.append(_weights_assumption(weights))
    docs = describe_model(model, revision=revision, assumptions=assumptions)
    if weights is not None:
        _check_quantized(docs.graph, weights)
    with doing("reading the parallel plans"):
        plans = model_parallel_plans(docs.graph, docs.family)
    request = PlanRequest(
        gpu=device,
        parallelism=Parallelism(tp=tp, ep=ep, pp=pp, dp=dp, redundant=redundant_experts),
        convention=Convention(convention),
        context=context,
        prompt=prompt,
        batch=batch,
        cache_dtype=cache_dtype_name(cache_dtype) if cache_dtype is not None else None,
        compute=compute,
        reserve=DEFAULT_RESERVE if reserve is None else reserve,
        engine=Engine(engine),
        memory_fraction=memory_fraction,
        plans=plans,
        weights=None if weights is None else WEIGHT_FORMATS[weights][1],
        config_heads=_config_heads(docs) if docs.graph.derived_from_code else None,
    )
    with doing("planning the deployment"):
        planned = plan_deployment(docs.graph, docs.family, request)
    planned = dataclasses.replace(planned, context_limit=docs.config.context_length())
    if as_json:
        sys.stdout.write(json_text(plan_json(model, planned)))
        return
    _stdout().print(render_plan(model, planned))


def _weights_assumption(weights: str) -> Assumption:
    """``--weights FORMAT`` as an assumption for the ``quantization_config`` the release lacks."""
    from archviz.cost.weight_formats import WEIGHT_FORMATS
    from archviz.graph.nodes import Assumption

    if weights not in WEIGHT_FORMATS:
        raise InputError(f"--weights must be one of {', '.join(WEIGHT_FORMATS)}", path=f"--weights {weights}")
    config, _words = WEIGHT_FORMATS[weights]
    return Assumption(key="quantization_config", value=json.dumps(config), source=f"--weights {weights}")


def _check_quantized(graph: Graph, weights: str) -> None:
    """``InputError`` when ``--weights`` quantizes nothing of the model (MXFP4 of a model without the expert banks
    transformers' MXFP4 quantizer converts)."""
    stored = {row.dtype for node in graph.nodes for row in node.parameters}
    if not any(row.packed or row.scale_block for node in graph.nodes for row in node.parameters) and not any(
        dtype.startswith("F8") for dtype in stored
    ):
        raise InputError(
            f"quantizes nothing of this model (transformers' {weights.upper()} quantizer converts none of its modules)",
            path=f"--weights {weights}",
        )
