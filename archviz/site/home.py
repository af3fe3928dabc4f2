"""The home page and the search index: every model, and every model's groups and nodes."""

from __future__ import annotations

from collections.abc import Sequence

from archviz.site.formatting import script_json
from archviz.site.index import UNVERIFIED_STATUS, ModelIndex, group_href, model_description, node_href
from archviz.site.overview import headline_figures
from archviz.site.table import build_model_table
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
                figures=headline_figures(index.docs.totals, index.graph)[:3],
                verification=index.context.verification or UNVERIFIED_STATUS,
            )
            for index in indexes
        ),
        table=build_model_table(indexes),
        comparisons=tuple(comparisons),
    )


def build_search_index(indexes: Sequence[ModelIndex]) -> str:
    """``search-index.js``: every model, group and node, with site-root-relative links."""
    entries: list[dict[str, str]] = []
    for index in indexes:
        name = index.title()
        entries.append(
            {"t": name, "k": "model", "m": name, "u": f"{index.slug}/index.html", "s": model_description(index.graph)}
        )
        for group in index.graph.groups:
            entries.append(
                {
                    "t": group.title,
                    "k": f"group · {group.kind.value}",
                    "m": name,
                    "u": group_href(group.id, root="", slug=index.slug),
                    "s": group.summary,
                }
            )
        for node in index.graph.nodes:
            where = " › ".join(g.title for g in reversed(index.ancestors(node.group)))
            entries.append(
                {
                    "t": node.title,
                    "k": node.kind.value,
                    "m": f"{name} · {where}",
                    "u": node_href(node.id, root="", slug=index.slug),
                    "s": f"{node.summary} {node.code}",
                }
            )
    return f"// archviz search index: models, groups and nodes.\nwindow.{SEARCH_GLOBAL} = {script_json(entries)};\n"
