"""The home page and the search index: every model, and every model's groups and nodes."""

from __future__ import annotations

from collections.abc import Sequence

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


def build_search_index(indexes: Sequence[ModelIndex]) -> str:
    """``search-index.js``: every model, group and node, with site-root-relative links.

    Each entry: ``t`` title, ``k`` kind, ``m`` model (and where in it), ``g`` the model it belongs to (results are
    grouped by it), ``u`` link, ``s`` summary, ``x`` everything else a reader may type: the id, the code, the config
    keys, the family, the model type and name.
    """
    entries: list[dict[str, str]] = []
    for index in indexes:
        name = index.title()
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
                "x": about,
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
                    "x": _text(group.id, group.title, group.kind.value, about),
                }
            )
        for node in index.graph.nodes:
            where = " › ".join(group_title(g) for g in reversed(index.ancestors(node.group)))
            keys = [*node.config_keys, *(key for setting in node.settings for key in setting.config_keys)]
            entries.append(
                {
                    "t": node.title,
                    "k": node.kind.value,
                    "m": f"{name} · {where}",
                    "g": name,
                    "u": node_href(node.id, root="", slug=index.slug),
                    "s": node.summary,
                    "x": _text(node.id, node.code, where, " ".join(dict.fromkeys(keys)), about),
                }
            )
    return f"// archviz search index: models, groups and nodes.\nwindow.{SEARCH_GLOBAL} = {script_json(entries)};\n"
