"""Rendering: pure functions from one view model to one page's text through Jinja2, and the whole site as files.

Jinja2 runs with autoescape on and ``StrictUndefined``; a user template folder (``template_dir``) is put first on
the search path, so that any template or asset can be overridden. Nothing here touches the file system except
reading templates: ``site_files`` yields every file's text and the publisher writes them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

import archviz
from archviz.common.versions import installed_versions, version_line
from archviz.gallery import GalleryEntry, check_records
from archviz.pipeline import ModelDocs
from archviz.site.cards import build_card_view, diagram_script, diagram_script_text, group_diagrams
from archviz.site.compare import CompareView, build_compare_view, compare_pairs, compare_path
from archviz.site.gallery import GALLERY_DATA, GalleryView, build_gallery_view, gallery_data
from archviz.site.home import build_home_view, build_search_index
from archviz.site.index import SITE_MARKER, ModelContext, ModelIndex, model_slugs
from archviz.site.llms import LLMS_TXT, llms_txt, model_json, model_json_path
from archviz.site.overview import build_overview_view
from archviz.site.overview_views import OverviewView
from archviz.site.views import CardView, HomeView, Link

SITE_MARKER_TEXT = "archviz documentation site\n"
"""What the marker file says."""
ASSETS = (
    "assets/archviz.css",
    "assets/archviz.js",
    "assets/compare.css",
    "assets/compare.js",
    "assets/explorer.js",
)
"""Static files copied from the template folders (a user folder may override them)."""
GALLERY_ASSETS = ("assets/gallery.css", "assets/gallery.js")
"""The same, for a gallery's home page only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderContext:
    """How pages are rendered: the template environment (no process-wide state)."""

    environment: jinja2.Environment
    """Jinja2 environment with the template search path."""


# ---------------------------------------------------------------------------------------------------
# Templates


def builtin_template_dir() -> Path:
    """The bundled templates: inside the package when installed from a wheel, else the repo's folder."""
    package = Path(archviz.__file__).parent
    inside = package / "templates"
    return inside if inside.is_dir() else package.parent / "templates"


def make_environment(template_dir: Path | None = None) -> jinja2.Environment:
    """A Jinja2 environment: the user's folder first on the search path, then the bundled templates."""
    search = [str(template_dir)] if template_dir is not None else []
    search.append(str(builtin_template_dir()))
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    # Every page's footer: the line numbers cited depend on transformers' files, the meta-model counts on torch.
    environment.globals["versions"] = version_line(installed_versions())
    return environment


def render_context(template_dir: Path | None = None) -> RenderContext:
    """The render context for a template folder (or the bundled templates only)."""
    return RenderContext(environment=make_environment(template_dir))


def render_card(view: CardView, context: RenderContext) -> str:
    """A node's card page."""
    return context.environment.get_template("card.html").render(view=view, page=view.page)


def render_overview(view: OverviewView, context: RenderContext) -> str:
    """A model's overview page."""
    return context.environment.get_template("overview.html").render(view=view, page=view.page)


def render_home(view: HomeView, context: RenderContext) -> str:
    """The site's home page."""
    return context.environment.get_template("home.html").render(view=view, page=view.page)


def render_gallery(view: GalleryView, context: RenderContext) -> str:
    """The gallery's home page."""
    return context.environment.get_template("gallery.html").render(view=view, page=view.page)


def render_compare(view: CompareView, context: RenderContext) -> str:
    """A compare page."""
    return context.environment.get_template("compare.html").render(view=view, page=view.page)


def read_asset(name: str, context: RenderContext) -> str:
    """A static asset's text from the first template folder that has it."""
    loader = context.environment.loader
    if loader is None:  # make_environment always sets one
        raise ValueError("the environment has no template loader")
    source, _, _ = loader.get_source(context.environment, name)
    return source


# ---------------------------------------------------------------------------------------------------
# The site's files


def site_files(
    models: Sequence[ModelDocs],
    context: RenderContext,
    contexts: Mapping[str, ModelContext] | None = None,
    compare: Sequence[tuple[str, str]] | None = None,
    gallery: Sequence[GalleryEntry] | None = None,
) -> Iterator[tuple[str, str]]:
    """Every file of the site as (relative path, text), in a fixed order.

    ``compare`` names the pairs of models that get a compare page (as given or by folder name); None compares the
    models of each family pairwise when the family has few (``archviz.site.compare.compare_pairs``). With ``gallery``
    (the catalog's entries of ``models``, in their order) the home page is the gallery's, and each model it follows
    another is compared with it.
    """
    contexts = contexts or {}
    slugs = model_slugs(models)
    if gallery is not None:
        compare = [(entry.follows, entry.slug) for entry in gallery if entry.follows is not None]
    pairs = compare_pairs(models, slugs, compare)
    indexes = [
        ModelIndex(docs, slug, contexts.get(docs.graph.model.name, ModelContext()))
        for docs, slug in zip(models, slugs, strict=True)
    ]
    compared = [(indexes[a], indexes[b]) for a, b in pairs]
    links = [Link(title=f"{a.title()} vs {b.title()}", href=compare_path(a, b)) for a, b in compared]
    yield SITE_MARKER, SITE_MARKER_TEXT
    for asset in ASSETS:
        yield asset, read_asset(asset, context)
    yield "search-index.js", build_search_index(indexes)
    yield LLMS_TXT, llms_txt(indexes)
    views = {(a.slug, b.slug): build_compare_view(a, b) for a, b in compared}
    if gallery is None:
        yield "index.html", render_home(build_home_view(indexes, links), context)
    else:
        summaries = {(a.slug, b.slug): (compare_path(a, b), views[(a.slug, b.slug)].summary) for a, b in compared}
        for asset in GALLERY_ASSETS:
            yield asset, read_asset(asset, context)
        yield GALLERY_DATA, gallery_data(indexes)
        yield "index.html", render_gallery(build_gallery_view(indexes, gallery, check_records(), summaries), context)
    for a, b in compared:
        yield compare_path(a, b), render_compare(views[(a.slug, b.slug)], context)
    for index in indexes:
        yield f"{index.slug}/index.html", render_overview(build_overview_view(index), context)
        yield model_json_path(index), model_json(index, compact=gallery is not None)
        diagrams = group_diagrams(index, "../../")  # drawn once, shared by the cards of each sublayer's nodes
        shared = gallery is not None  # a gallery's cards load them from one script each, not a copy per card
        if shared:
            for group_id, svg in diagrams.items():
                yield f"{index.slug}/{diagram_script(group_id)}", diagram_script_text(group_id, svg)
        for node in index.graph.nodes:
            yield (
                f"{index.slug}/nodes/{node.id}.html",
                render_card(build_card_view(index, node, diagrams=diagrams, shared=shared), context),
            )
