"""The "Architecture" section of a model card: Markdown a model author pastes into the Hub ``README.md``.

Every number is read from the ``inspect --json`` document (``archviz.present.documents.inspect_document``), so the card
states exactly what ``archviz inspect --json`` does; the diagram is the Mermaid flowchart of the site's data-flow
reading (the Hub renders Mermaid), and the links point at the pinned source lines the provenance stage found.

Text from the model (names, titles, config keys) is escaped for Markdown (``archviz.present.markdown``): it reads as
itself, never as a link, a tag or a table cell break.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from archviz.code.pins import RevisionKind
from archviz.common.versions import installed_versions, version_line
from archviz.pipeline import ModelDocs
from archviz.present.documents import inspect_document
from archviz.present.labels import PART_TITLES, REVISION_NOTES
from archviz.present.markdown import markdown_link, markdown_text
from archviz.present.mermaid import mermaid_flowchart
from archviz.present.numbers import count, line_range
from archviz.site.formatting import runs


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GFM table; cells are already Markdown (escaped text, numbers, links)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _headline(document: Mapping[str, Any]) -> list[str]:
    totals = document["totals"]
    suffix = "" if document["cost"]["modelled_in_full"] else " (of the modelled part)"
    rows = [["Parameters" + suffix, count(totals["parameters"])]]
    rows += [
        [f"Parameters of the {markdown_text(PART_TITLES.get(part, part))}", count(value)]
        for part, value in totals["parts"].items()
    ]
    rows += [
        ["Active per token" + suffix, count(totals["active_parameters"])],
        ["Active per token, input embedding left out" + suffix, count(totals["active_parameters_without_embedding"])],
        ["Persistent buffers (elements)", count(totals["buffers"])],
        ["Multi\\-token prediction parameters (not in the total)", count(totals["mtp_parameters"])],
        ["Checkpoint bytes (predicted)", count(sum(totals["bytes_by_dtype"].values()))],
    ]
    lines = _table(["Figure", "Value"], rows)
    by_dtype = sorted(totals["by_dtype"].items(), key=lambda item: (-item[1], item[0]))
    lines += _table(
        ["Checkpoint dtype", "Elements", "Bytes"],
        [
            [markdown_text(dtype), count(elements), count(totals["bytes_by_dtype"][dtype])]
            for dtype, elements in by_dtype
        ],
    )
    return lines


def _layer_runs(layers: Sequence[Mapping[str, Any]]) -> Iterator[list[str]]:
    """Consecutive layers of one kind as one row: ``1–60 | MLA | MoE | 60``."""
    kinds: dict[tuple[str, str, str], list[int]] = {}
    for layer in layers:
        kinds.setdefault((layer["part"], layer["mixer"], layer["ffn"]), []).append(layer["index"])
    rows: list[tuple[int, list[str]]] = []
    for (part, mixer, ffn), indexes in kinds.items():
        for start, end in runs(indexes):
            kind = [markdown_text(mixer), markdown_text(ffn), markdown_text(part)]
            rows.append((start, [line_range(start, end), *kind, count(end - start + 1)]))
    yield from (row for _, row in sorted(rows, key=lambda item: item[0]))


def _layer_map(document: Mapping[str, Any]) -> list[str]:
    lines = ["### Layer map", ""]
    if document["layers"]:
        return lines + _table(
            ["Layers", "Mixer", "Feed-forward", "Part", "Count"], list(_layer_runs(document["layers"]))
        )
    rows = [
        [markdown_text(group["title"]), markdown_text(group["where"]), count(group["instances"])]
        for group in document["groups"]
    ]
    return [*lines, "The graph names no layer kinds; its groups:", "", *_table(["Group", "Where", "Instances"], rows)]


def _cost(document: Mapping[str, Any]) -> list[str]:
    cost = document["cost"]
    prompt, context, batch = count(cost["prompt"]), count(cost["context"]), count(cost["batch"])
    lines = ["### Cost", ""]
    flops = cost.get("flops")
    if flops is None:
        return [*lines, f"Not priced: {markdown_text(cost.get('not_priced') or 'the graph prices nothing')}", ""]
    if not cost["modelled_in_full"]:  # the modelled part's FLOPs and cache are not the model's: no zeros shown
        weights = count(cost["weights"]["bytes"])
        return [
            *lines,
            "Only part of this model is modelled: its FLOPs, cache and state are unknown (the modelled part's would "
            f"read as the model's). Weight bytes of the modelled part: {weights}.",
            "",
        ]
    at_context = f"B = {batch}, S = {context}"
    rows = [
        ["FLOPs of a prefill", f"B = {batch}, T = {prompt}", count(flops["prefill"])],
        ["FLOPs per decoded token, transformers' eager forward", at_context, count(flops["decode"])],
    ]
    if (absorbed := flops.get("decode_absorbed")) is not None:
        rows.append(["FLOPs per decoded token, MLA absorbed as engines run it", at_context, count(absorbed)])
    rows.append(["Weight bytes", "", count(cost["weights"]["bytes"])])
    cache = cost.get("cache")
    if cache is not None:
        rows += [
            [f"Cache bytes per token ({markdown_text(cache['dtype'])})", "", count(cache["bytes_per_token"])],
            ["Cache bytes", f"B = {batch}, S = {context}", count(cache["bytes_at_context"])],
        ]
    lines += _table(["Cost", "At", "Value"], rows)
    if cost.get("not_priced_parts"):
        lines += [markdown_text(cost["not_priced_parts"]), ""]
    return lines


def _symbols(docs: ModelDocs) -> list[str]:
    """What the symbols and short labels in the diagram's shapes stand for (``N_e``, ``d``), as the site's pages say
    beside their shapes."""
    from archviz.site.index import symbol_legend

    legend = symbol_legend(docs.graph.nodes)
    if not legend:
        return []
    said = "; ".join(f"**{markdown_text(item.symbol)}** {markdown_text(item.meaning)}" for item in legend)
    return [f"Symbols in the shapes: {said}.", ""]


def _sources(document: Mapping[str, Any]) -> list[str]:
    files = document["sources"]
    modeling, config = files["modeling_file"], files["config_file"]
    lines = ["### Source", ""]
    for label, file in (("Modeling code", modeling), ("Config", config)):
        if file is not None:
            where = f"{file['path']} at {file['revision']}" if file.get("revision") else file["path"]
            # A release tag (v5.24.0) says what it is; a commit or a content hash is said to be one.
            shown = file.get("revision") and file["revision_kind"] != RevisionKind.PACKAGE_VERSION
            said = f" ({REVISION_NOTES[RevisionKind(file['revision_kind'])]})" if shown else ""
            lines.append(f"- {label}: {markdown_link(where, file.get('url'))}{said}")
    lines.append("")
    rows = []
    for node in document["nodes"]:
        if node["kind"] == "tensor":  # a tensor state is defined by the operator that writes it
            continue
        rows.append(
            [
                markdown_text(node["title"]),
                count(node["parameters_per_instance"]),
                count(node["instances"]),
                _code_link(node),
            ]
        )
    return lines + _table(["Operator", "Parameters per instance", "Instances", "In the code"], rows)


def _code_link(node: Mapping[str, Any]) -> str:
    """Where the node's code is, as ``inspect --json`` locates it: the class or function that defines it, else (an
    operator written inline in a forward pass: a split, a residual add, a cache update) the lines that compute it;
    "not located" only where neither was found."""
    spans = [span for span in node["source"] if span["file"] != "config.json"]
    found = next((span for span in spans if span["role"] == "definition"), None) or next(
        (span for span in spans if span["role"] == "use"), None
    )
    if found is None:
        return "not located"
    where = line_range(found["start"], found["end"])
    said = "defined in" if found["role"] == "definition" else "computed in"
    text = f"{said} {found['file']} line{'s' if found['end'] > found['start'] else ''} {where}"
    return markdown_link(text, found.get("url"))


def model_card(docs: ModelDocs, *, repo: str | None = None) -> str:
    """The model card's "Architecture" section as Markdown (the same numbers as ``inspect --json``). ``repo``: the
    Hub repo the card is for, named (and linked) as where the config is from when the model was read from a folder."""
    document = inspect_document(docs)
    model = document["model"]
    revision = f" at revision {markdown_text(model['revision'])}" if model.get("revision") else ""
    name = model.get("repo") or repo
    origin = f" of {markdown_link(name, f'https://huggingface.co/{name}')}{revision}" if name else ""
    lines = [
        "## Architecture",
        "",
        f"{markdown_text(model['architecture'] or model['name'])} ({markdown_text(model['family'])} family), "
        f"read from the config{origin} by archviz.",
        "",
        *_headline(document),
        *_layer_map(document),
        *_cost(document),
        "### Data flow",
        "",
        "```mermaid",
        mermaid_flowchart(docs.graph).rstrip("\n"),
        "```",
        "",
        *_symbols(docs),
        *_sources(document),
        f"Generated by {markdown_text(version_line(installed_versions()))}.",
    ]
    return "\n".join(lines) + "\n"
