"""Will it fit, on the overview: the sequences that fit beside the weights against the context length, on eight of
each GPU of archviz's table, with the model split as engines split it (``archviz.cost.plan``'s engine convention).

One plan splits the weights and the cache over the ranks; each GPU's line is then the plan's arithmetic with that
GPU's memory (``sequences_at``). A model the plans cannot split eight ways, or one the cost model does not price,
gets a sentence saying why instead of the plot; a graph read off the code is split by transformers' plans for its model
type, as ``archviz plan`` splits it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from archviz.common.errors import InputError
from archviz.cost.engines import VLLM_UTILIZATION, VLLM_VERSION, Engine
from archviz.cost.gpus import GPUS, Gpu
from archviz.cost.parallel_plans import Convention
from archviz.cost.plan import GIB, Plan, PlanRequest, plan_deployment, sequences_at
from archviz.cost.pricers import priced, unpriced_reason
from archviz.cost.report import modelled_in_full
from archviz.cost.sharding import Parallelism
from archviz.present.numbers import count
from archviz.site.charts import Series, line_chart
from archviz.site.costs import plot_context
from archviz.site.index import ModelIndex
from archviz.site.overview_views import DeployRow, DeployView
from archviz.transformers.configs import model_parallel_plans

GPUS_PER_NODE = 8
"""The GPUs the section splits the model over: one 8-GPU node, tensor parallel 8."""

_UNLIMITED = Gpu(
    key="unlimited",
    title="memory enough for any split",
    memory=1 << 60,
    bandwidth=1,
    bf16=1,
    fp8=1,
    fp4=None,
    interconnect=None,
    source="",
)
"""The plan's GPU while splitting: the weights and cache do not depend on it; each GPU's memory is applied after."""


def _points(plan: Plan, usable: int, longest: int) -> tuple[tuple[int, int], ...]:
    points = []
    for step in range(1, 9):
        context = round(longest * step / 8)
        found = sequences_at(plan, usable, context)
        points.append((context, found or 0))
    return tuple(points)


SITE_GPUS: tuple[Gpu, ...] = tuple(GPUS[key] for key in ("h100", "h200", "b200", "gb200", "mi300x", "mi325x", "mi355x"))
"""The GPUs the section draws, a line each in one of the chart's seven colours: the data-centre parts large models are
served on; `archviz plan --gpu` knows the rest of the table (A100, L4, L40S, RTX, H20, H800, GH200, B300, Gaudi 3)."""


def _gib(value: int) -> str:
    """Bytes in GiB, the one unit of the section: the memory CUDA and nvidia-smi report is in binary units."""
    return f"{value / GIB:,.1f} GiB"


def deploy_view(index: ModelIndex) -> DeployView:
    """The overview's deployment section."""
    graph = index.graph
    setup = (
        f"On {GPUS_PER_NODE} GPUs with tensor parallelism {GPUS_PER_NODE}, split as vLLM and SGLang split them "
        f"(attention by heads, MLA's latent projections and cache whole on every GPU, the rest by transformers' "
        f"plans), the cache in the checkpoint's dtype ({graph.dtype}), each GPU's memory for the weights and the "
        f"cache as {VLLM_VERSION} sizes it at its defaults ({VLLM_UTILIZATION:.0%} of the memory CUDA reports, less "
        f"the peak of its profile run and the memory allocated outside torch). "
        f"archviz plan answers for any GPU count, split, cache dtype and engine."
    )
    if not priced(graph):
        return DeployView(setup=setup, reason=f"The cost model does not price this model: {unpriced_reason(graph)}.")
    if not modelled_in_full(graph):
        return DeployView(
            setup=setup,
            reason="Only part of this model is modelled: what each GPU would hold is not known from the modelled part.",
        )
    plans = model_parallel_plans(graph, index.docs.family)
    if plans is None:
        return DeployView(setup=setup, reason="transformers' classes give this model no tensor-parallel plan.")
    request = PlanRequest(
        gpu=_UNLIMITED,
        parallelism=Parallelism(tp=GPUS_PER_NODE),
        convention=Convention.ENGINE,
        batch=1,
        plans=plans,
        engine=Engine.VLLM,
    )
    try:
        plan = plan_deployment(graph, index.docs.family, request)
    except InputError as error:
        return DeployView(setup=setup, reason=f"Not shown: {error.message}.")
    longest = plot_context(index)
    weights = max(rank.weight_bytes for rank in plan.ranks)
    rows: list[DeployRow] = []
    series: list[Series] = []
    for number, gpu in enumerate(SITE_GPUS):
        css = f"series-{number}"
        usable = request.engine_memory(graph, gpu).usable
        at_longest = sequences_at(plan, usable, longest)
        fits = weights <= usable
        if fits and at_longest is not None:
            series.append(Series(label=gpu.title, points=_points(plan, usable, longest), css_class=css))
        if not fits:
            said = f"weights do not fit ({_gib(weights)} per GPU, {_gib(usable)} usable)"
        elif at_longest is None:
            said = "no cache bounds them"
        else:
            said = count(at_longest)
        address = gpu.source.split(" ", 1)[0]
        rows.append(
            DeployRow(
                label=gpu.title,
                css=css if fits and at_longest is not None else "",
                memory=_gib(gpu.memory),
                free=_gib(max(usable - weights, 0)),
                sequences=said,
                source=address,
                source_title=urlsplit(address).netloc.removeprefix("www.") + " datasheet",
            )
        )
    svg = ""
    if series:
        svg = line_chart(
            series,
            x_title="context length S (tokens cached per sequence)",
            y_title="sequences that fit",
            title=f"Sequences that fit beside the weights on {GPUS_PER_NODE} GPUs, against the context length",
            y_label=lambda value: f"{value:,.0f}",
        )
    return DeployView(
        setup=setup,
        weights=f"{count(weights)} bytes ({_gib(weights)}) of weights on each GPU",
        svg=svg,
        rows=tuple(rows),
        longest=f"Sequences at {longest:,} tokens",
    )
