"""Presenting a deployment plan: the ``archviz plan --json`` document (``archviz.plan/1``) and the terminal view.

Pure functions of a ``Plan``; the CLI prints what they return.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group as RichGroup
from rich.markup import escape
from rich.table import Table

from archviz.common.versions import version_fields
from archviz.cost import MAX_POSITIONS
from archviz.cost.engines import Engine
from archviz.cost.gpus import Gpu
from archviz.cost.plan import GIB, PLAN_SCHEMA, Plan, decode_tokens_per_second, longest_context
from archviz.cost.roofline import Rank
from archviz.present.numbers import at_least_ms, gib_text
from archviz.present.plan_words import plan_notes

SUMS = {
    "weight_bytes": "per rank: Σ over the predicted checkpoint's tensors (inspect --json: each node's parameters, "
    "shape and dtype, times its placement) of the rank's local shape × bytes per element; a replicated tensor whole, a "
    "split one cut along the dimension its rule names (splits), a routed expert on its EP rank only",
    "cache_per_sequence": "per rank: context × bytes per token + state bytes of the layers on its stage (cost.cache "
    "of inspect --json, at the cache dtype; a GQA layer's keys and values scaled to the KV heads the rank keeps)",
    "sequences": "⌊(usable bytes − weight bytes) / cache per sequence⌋ on the tightest rank, × dp; usable bytes: "
    "what the engine leaves each GPU for weights and cache (memory.terms)",
    "decode_bound": "per stage the slowest rank's max(bytes read / bandwidth, decode FLOPs / throughput), stages "
    "added; bytes read = the rank's weights (routed experts: at most batch × top-k per layer; the embedding: one row "
    "per sequence) + batch × cache per sequence",
    "prefill_bound": "per stage the slowest rank's share of one prompt's FLOPs / throughput, stages added",
}
"""How each figure is a sum anyone can redo from ``inspect --json`` and the GPU table."""


def _gpu_json(gpu: Gpu) -> dict[str, Any]:
    return {
        "key": gpu.key,
        "title": gpu.title,
        "memory_bytes": gpu.memory,
        "memory_gib": round(gpu.memory / GIB, 2),
        "memory_note": gpu.memory_note,
        "bandwidth_bytes_per_second": gpu.bandwidth,
        "bf16_flops": gpu.bf16,
        "fp8_flops": gpu.fp8,
        "fp4_flops": gpu.fp4,
        "interconnect_bytes_per_second": gpu.interconnect,
        "source": gpu.source,
    }


def _rank_json(plan: Plan, rank: Rank) -> dict[str, Any]:
    bandwidth, throughput = plan.gpu.bandwidth, plan.throughput
    decode = None
    if rank.decode_bytes is not None and rank.decode_flops is not None:
        decode = {
            "bytes_read": rank.decode_bytes,
            "flops": rank.decode_flops,
            "memory_seconds": rank.decode_bytes / bandwidth,
            "compute_seconds": rank.decode_flops / throughput,
            "flops_per_byte": round(rank.decode_flops / rank.decode_bytes, 3) if rank.decode_bytes else None,
        }
    return {
        "stage": rank.stage,
        "rank": rank.index,
        "tp_rank": rank.index % plan.parallelism.tp,
        "layers": [rank.layers[0], rank.layers[-1]] if rank.layers else [],
        "weight_bytes": rank.weight_bytes,
        "weight_bytes_by_split": rank.weight_bytes_by_split,
        "routed_experts_per_layer": rank.experts,
        "cache": None
        if rank.cache_per_sequence is None
        else {
            "bytes_per_token": rank.cache_per_token,
            "state_bytes": rank.state_per_sequence,
            "bytes_per_sequence": rank.cache_per_sequence,
        },
        "free_bytes": rank.free_bytes,
        "sequences": rank.sequences,
        "decode": decode,
        "prefill": None
        if rank.prefill_flops is None
        else {"flops": rank.prefill_flops, "seconds": rank.prefill_flops / throughput},
    }


def plan_json(name: str, plan: Plan) -> dict[str, Any]:
    """The ``archviz plan --json`` document: bytes and FLOPs integers, times in seconds (floats, lower bounds)."""
    p = plan.parallelism
    binding = max(plan.ranks, key=lambda rank: rank.decode_bytes or 0)
    speed = decode_tokens_per_second(plan)
    return {
        "schema": PLAN_SCHEMA,
        **version_fields(),
        "model": name,
        "gpu": _gpu_json(plan.gpu),
        "parallelism": {
            "gpus": p.gpus,
            "tp": p.tp,
            "ep": p.ep,
            "pp": p.pp,
            "dp": p.dp,
            "redundant_experts": p.redundant,
        },
        "convention": plan.convention.value,
        "context": plan.context,
        "prompt": plan.prompt,
        "batch": plan.batch,
        "cache_dtype": plan.cache_dtype,
        "compute": plan.compute,
        "reserve": plan.reserve if plan.memory.engine is Engine.NONE else None,
        "usable_bytes": plan.usable,
        "memory": {
            "engine": plan.memory.engine.value,
            "source": plan.memory.source,
            "fraction": plan.memory.fraction,
            "terms": [{"name": t.name, "bytes": t.bytes, "formula": t.formula} for t in plan.memory.terms],
        },
        "weights": {
            "bytes": plan.weight_bytes,
            "mtp_bytes_left_out": plan.mtp_bytes,
            "bytes_by_split": plan.checkpoint_bytes_by_split,
            "splits": plan.splits,
            "largest_rank_bytes": max(rank.weight_bytes for rank in plan.ranks),
            "engine_relayout": None
            if plan.relayout is None
            else {
                "engine": plan.relayout.engine,
                "backend": plan.relayout.backend,
                "source": plan.relayout.source,
                "bytes_added": plan.relayout.added,
            },
        },
        "sequences": plan.sequences,
        "longest_context": longest_context(plan),
        "longest_context_for_batch": longest_context(plan, plan.batch) if plan.batch_given else None,
        "context_limit": None
        if plan.context_limit is None
        else {"positions": plan.context_limit[0], "key": plan.context_limit[1]},
        "roofline": None
        if not plan.priced
        else {
            "decode_seconds_lower_bound": plan.decode_seconds,
            "decode_memory_seconds": plan.decode_memory_seconds,
            "prefill_seconds_lower_bound": plan.prefill_seconds,
            "decode_flops_per_byte": round((binding.decode_flops or 0) / binding.decode_bytes, 3)
            if binding.decode_bytes
            else None,
            "machine_flops_per_byte": round(plan.throughput / plan.gpu.bandwidth, 3),
            "decode_tokens_per_second_per_stream": speed[0] if speed else None,
            "decode_tokens_per_second": speed[1] if speed else None,
        },
        "ranks": [_rank_json(plan, rank) for rank in plan.ranks],
        "sums": SUMS,
        "notes": plan_notes(plan),
    }


def render_plan(name: str, plan: Plan) -> RichGroup:
    """The terminal view: the deployment, the tightest rank, the rank table, the roofline, the notes."""
    p, gpu = plan.parallelism, plan.gpu
    head = Table(title=f"archviz plan {escape(name)}", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("GPU", escape(f"{p.gpus} × {gpu.title}"))
    device = plan.memory.terms[0]
    if device.bytes != gpu.memory:  # CUDA's total, below nvidia-smi's
        head.add_row("memory per GPU (as used)", f"{gib_text(device.bytes)}: {escape(device.formula)}")
        head.add_row("  nvidia-smi's", f"{gib_text(gpu.memory)}; {escape(gpu.memory_note)}")
    else:
        head.add_row("memory per GPU (as used)", f"{gib_text(gpu.memory)}; {escape(gpu.memory_note)}")
    for term in plan.memory.terms[1:]:
        head.add_row(f"  {escape(term.name)}", f"{gib_text(abs(term.bytes))}: {escape(term.formula)}")
    head.add_row(f"for weights and cache ({plan.memory.engine.value})", gib_text(plan.usable))
    head.add_row("tp / ep / pp / dp", f"{p.tp} / {p.ep} / {p.pp} / {p.dp}")
    if p.redundant:
        head.add_row("redundant expert copies per MoE layer", f"{p.redundant:,}")
    head.add_row("convention", plan.convention.value)
    head.add_row("weights (checkpoint, main model)", gib_text(plan.weight_bytes))
    if plan.mtp_bytes:
        head.add_row("MTP layers (left out)", gib_text(plan.mtp_bytes))
    head.add_row("weights on the fullest rank", gib_text(max(rank.weight_bytes for rank in plan.ranks)))
    if plan.relayout is not None:
        relaid = plan.relayout
        head.add_row(
            f"  of which {relaid.engine}'s re-layout ({relaid.backend} kernels)",
            f"{relaid.added:+,} B against the checkpoint's share",
        )
    first = plan.ranks[0]
    head.add_row(
        f"cache per sequence at S = {plan.context:,} ({plan.cache_dtype}), rank 0", gib_text(first.cache_per_sequence)
    )
    sequences = plan.sequences
    head.add_row("sequences that fit at the context", "unknown" if sequences is None else f"{sequences:,}")
    head.add_row("longest context the memory allows one sequence", _longest_text(longest_context(plan), plan))
    if plan.batch_given:
        head.add_row(
            f"  … and each of {plan.batch:,} sequences per replica",
            _longest_text(longest_context(plan, plan.batch), plan),
        )
    head.add_row(f"decode step at batch {plan.batch:,} per replica ({plan.compute})", at_least_ms(plan.decode_seconds))
    head.add_row("  of which reading memory", at_least_ms(plan.decode_memory_seconds))
    speed = decode_tokens_per_second(plan)
    if speed is not None:
        streams = plan.batch * p.dp
        head.add_row(
            f"decode tokens/s: one stream, all {streams:,} streams",
            f"≤ {speed[0]:,.1f}, ≤ {speed[1]:,.1f}",
        )
    head.add_row(f"prefill of one {plan.prompt:,}-token prompt ({plan.compute})", at_least_ms(plan.prefill_seconds))
    ranks = Table(title="Ranks")
    columns = ("stage", "rank", "layers", "weights", "cache / sequence", "free", "sequences", "decode bytes")
    for column in columns:
        ranks.add_column(column, justify="left" if column in ("stage", "rank", "layers") else "right")
    shown = plan.ranks if len(plan.ranks) <= 16 else plan.ranks[:: max(1, len(plan.ranks) // 16)]
    for rank in shown:
        ranks.add_row(
            str(rank.stage),
            str(rank.index),
            f"{rank.layers[0]}–{rank.layers[-1]}" if rank.layers else "",
            f"{rank.weight_bytes / GIB:,.2f} GiB",
            "unknown" if rank.cache_per_sequence is None else f"{rank.cache_per_sequence / GIB:,.3f} GiB",
            f"{rank.free_bytes / GIB:,.2f} GiB",
            "unknown" if rank.sequences is None else f"{rank.sequences:,}",
            "unknown" if rank.decode_bytes is None else f"{rank.decode_bytes:,}",
        )
    source = f"[dim]GPU figures: {escape(gpu.source)}[/]"
    notes = [f"[dim]{escape(note)}[/]" for note in plan_notes(plan)]
    return RichGroup(head, ranks, source, *notes)


def _longest_text(positions: int | None, plan: Plan) -> str:
    if positions is None:
        return "unknown (not priced, or no cache)"
    said = "any: the cache stops growing" if positions == MAX_POSITIONS else f"{positions:,} positions"
    if plan.context_limit is not None and positions > plan.context_limit[0]:
        limit, key = plan.context_limit
        said += f", beyond the model's own {limit:,} ({escape(key)})"
    return said
