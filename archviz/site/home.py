"""The home page and the search index: every model, and every model's groups and nodes."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from archviz.cost.terms import Phase
from archviz.graph.nodes import Node, TensorRow
from archviz.present.numbers import setting_text
from archviz.site.cards import module_classes
from archviz.site.formatting import script_json
from archviz.site.index import (
    UNVERIFIED_STATUS,
    ModelIndex,
    group_href,
    group_title,
    model_description,
    node_href,
    partial_badge,
    revision_links,
)
from archviz.site.overview import headline_figures
from archviz.site.table import ROWS, build_model_table
from archviz.site.views import HomeView, Link, ModelSummary, Page

SEARCH_GLOBAL = "ARCHVIZ_SEARCH_INDEX"
"""The global variable ``search-index.js`` assigns."""


def build_home_view(indexes: Sequence[ModelIndex], comparisons: Sequence[Link] = ()) -> HomeView:
    """The home page: every model side by side, the compare pages, and each model's name, description, first three
    figures and verification."""
    return HomeView(
        page=Page(title="archviz: model architectures", root="", crumbs=(), phase_toggle=False),
        models=tuple(
            ModelSummary(
                link=Link(title=index.title(), href=f"{index.slug}/index.html"),
                architecture=index.graph.model.architecture or "",
                description=model_description(index.graph),
                # The same three on every card (a wrapper's parts, which a card could not show whole, are on its
                # overview): parameters, active per token, and active without the input embedding.
                figures=headline_figures(index.docs.totals, index.graph, parts=False)[:3],
                verification=index.context.verification or UNVERIFIED_STATUS,
                partial=partial_badge(index.graph, overview=f"{index.slug}/index.html"),
                revisions=revision_links(index.docs),
            )
            for index in indexes
        ),
        table=build_model_table(indexes),
        comparisons=tuple(comparisons),
    )


def _text(*parts: str) -> str:
    """One lower-case string to match a query against."""
    return " ".join(part for part in parts if part).lower()


DTYPE_WORDS = {
    "BF16": "bf16 bfloat16",
    "F16": "f16 fp16 float16 half",
    "F32": "f32 fp32 float32",
    "F64": "f64 fp64 float64",
    "F8_E4M3": "f8_e4m3 fp8 float8 float8_e4m3fn e4m3",
    "F8_E5M2": "f8_e5m2 fp8 float8 float8_e5m2 e5m2",
    "F8_E8M0": "f8_e8m0 float8_e8m0fnu e8m0 ue8m0",
    "U8": "u8 uint8",
    "I8": "i8 int8",
    "I32": "i32 int32",
    "I64": "i64 int64",
}
"""What a reader may type for a safetensors dtype: its own name, torch's, and the short names people use."""


def _dtype_words(dtype: str) -> str:
    return DTYPE_WORDS.get(dtype, dtype.lower())


def _stored_names(row: TensorRow) -> Iterator[str]:
    """The checkpoint names a node's tensor row stands for: the weight's, or what the checkpoint holds in its place
    (an FP8 block weight's ``weight_scale_inv``, a packed weight's ``weight_packed``, ``weight_scale`` …)."""
    yield row.tensor
    module = row.tensor.removesuffix(".weight")
    if row.scale_block is not None and module != row.tensor:
        yield f"{module}.weight_scale_inv"
    if row.packed is not None and module != row.tensor:
        yield from (f"{module}.{item.suffix}" for item in row.packed.stored)


def _node_search_text(node: Node, flops: tuple[int, int] | None) -> str:
    """Everything about a node a reader may paste: its numbers without separators (dimensions, tensor shapes and
    sizes, settings, FLOPs at the site's sizes), its dtypes by every name, and its checkpoint tensor names."""
    numbers: dict[int, None] = {}
    for shape in (*node.inputs, *node.outputs):
        numbers.update((dim.value, None) for dim in shape.dims if dim.value is not None)
    words: list[str] = []
    for row in (*node.parameters, *node.buffers):
        numbers.update((size, None) for size in row.shape)
        numbers[row.elements] = None
        words.append(_dtype_words(row.dtype))
        words.extend(_stored_names(row))
        if row.packed is not None:
            words.append(f"{row.packed.method} {row.packed.scheme}")
            words.extend(_dtype_words(item.dtype) for item in row.packed.stored)
    for setting in node.settings:
        plain = setting_text(setting).replace(",", "")  # a count as the card shows it
        if plain.isdigit():
            numbers[int(plain)] = None
    if flops is not None and any(flops):
        words.append("flops")
        numbers.update((value, None) for value in flops if value)
    return _text(" ".join(str(number) for number in numbers), *dict.fromkeys(words))


def _initials(title: str) -> str:
    """The abbreviation a title's words make, as readers name the parts (``Multi-head latent attention``: ``mla``,
    ``Mixture of experts``: ``moe``, ``Kimi Delta Attention``: ``kda``); empty for a one-word title."""
    words = [word for word in title.split() if word[:1].isalpha()]
    return "".join(word[0] for word in words).lower() if len(words) > 1 else ""


def _operator_types(node: Node) -> str:
    """The torch module classes that hold the node's tensors, by their own and their ``nn.`` names (``Linear``,
    ``nn.Linear``), where the graph records them."""
    return " ".join(f"{name} nn.{name}" for name in module_classes(node))


def _section_entries(index: ModelIndex, name: str, about: str) -> list[dict[str, str]]:
    """The overview's sections a reader searches for by what they hold: the headline figures (with their numbers),
    the costs (FLOPs, weight and cache bytes at the site's sizes), will-it-fit and the config file."""
    figures = headline_figures(index.docs.totals, index.graph)
    cost = index.cost
    numbers = [str(value) for value in (cost.prefill, cost.decode, cost.decode_absorbed, cost.weight_bytes) if value]
    sections = (
        (
            "Headline figures",
            "figures-heading",
            "Parameters, active parameters and the checkpoint's elements by dtype.",
            _text(
                "parameters active params total elements checkpoint dtype",
                " ".join(figure.value.replace(",", "") for figure in figures),
                " ".join(_dtype_words(dtype) for dtype in index.docs.totals.by_dtype),
            ),
        ),
        (
            "What it costs to run",
            "cost-heading",
            f"FLOPs, weight bytes, cache and state at {cost.sizes.batch} × {cost.sizes.prompt} prompt tokens, "
            f"{cost.sizes.context} cached.",
            _text("cost flops flop prefill decode weights bytes cache kv state memory", " ".join(numbers)),
        ),
        ("Will it fit", "deploy-heading", "GPUs, memory per GPU and sequences that fit.", "gpu gpus fit memory plan"),
        ("config.json", "config-heading", "The config file, line by line.", "config config.json keys"),
    )
    return [
        {
            "t": f"{name} · {title}",
            "k": "section",
            "m": name,
            "g": name,
            "u": f"{index.slug}/index.html#{anchor}",
            "s": summary,
            "x": _text(words, about),
        }
        for title, anchor, summary, words in sections
    ]


_SHORT_FIGURE = re.compile(r"\d[\d.]* ?[a-z]+")
"""A figure printed with its unit: ``1.03 t``, ``134 tflop``, ``70.3 kb`` (lower-cased)."""


def _figures_as_printed(index: ModelIndex) -> str:
    """The home table's figures of the model as the table prints them (``1.03 T``, ``70.3 KB``), and each once more
    without its space (``1.03T``): what a reader copies from the table, or types after reading it there."""
    printed = [cell.text.lower() for cell in (spec.read(index) for spec in ROWS if spec.numeric) if cell.sort]
    short = [text for text in printed if _SHORT_FIGURE.fullmatch(text)]
    return _text(*dict.fromkeys([*short, *(text.replace(" ", "") for text in short)]))


def build_search_index(indexes: Sequence[ModelIndex]) -> str:
    """``search-index.js``: every model, group and node, with site-root-relative links.

    Each entry: ``t`` title, ``k`` kind, ``m`` model (and where in it), ``g`` the model it belongs to (results are
    grouped by it), ``u`` link, ``s`` summary, ``x`` everything else a reader may type: the id, the code, the config
    keys, the family, the model type and name.
    """
    entries: list[dict[str, str]] = []
    for index in indexes:
        # A result says what its model's badge says: its counts are of a modelled part, or rest on assumed values.
        badge = partial_badge(index.graph, overview="")
        name = index.title() + (f" ({badge.label})" if badge is not None else "")
        model = index.graph.model
        about = _text(name, model.family, model.model_type, model.architecture or "")
        entries.append(
            {
                "t": name,
                "k": "model",
                "m": name,
                "g": name,
                "u": f"{index.slug}/index.html",
                "s": model_description(index.graph),
                "x": _text(about, _figures_as_printed(index)),
            }
        )
        for group in index.graph.groups:
            entries.append(
                {
                    "t": group_title(group),
                    "k": f"group · {group.kind.value}",
                    "m": name,
                    "g": name,
                    "u": group_href(group.id, root="", slug=index.slug),
                    "s": group.summary,
                    "x": _text(group.id, group.title, _initials(group.title), group.kind.value, about),
                }
            )
        entries.extend(_section_entries(index, name, about))
        for node in index.graph.nodes:
            where = " › ".join(group_title(g) for g in reversed(index.ancestors(node.group)))
            keys = [*node.config_keys, *(key for setting in node.settings for key in setting.config_keys)]
            cost = index.cost.nodes.get(node.id) if index.priced() else None
            flops = None
            if cost is not None:
                flops = (cost.flops(index.cost.sizes, Phase.PREFILL), cost.flops(index.cost.sizes, Phase.DECODE))
            entries.append(
                {
                    "t": node.title,
                    "k": node.kind.value,
                    "m": f"{name} · {where}",
                    "g": name,
                    "u": node_href(node.id, root="", slug=index.slug),
                    "s": node.summary,
                    "x": _text(
                        node.id,
                        node.code,
                        where,
                        " ".join(dict.fromkeys(keys)),
                        _node_search_text(node, flops),
                        _operator_types(node),
                        about,
                    ),
                }
            )
    return f"// archviz search index: models, groups and nodes.\nwindow.{SEARCH_GLOBAL} = {script_json(entries)};\n"
