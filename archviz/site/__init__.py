"""The documentation site: view models built from ``ModelDocs``, pure render functions, one publisher.

This is the last stage (render -> write), one module per kind of work, imports flowing one way:

- ``views``: the view models, frozen data in which every number is already formatted and every link
  already relative; ``formatting`` and ``highlight`` (Pygments) help fill them;
- ``index``, ``cards``, ``overview``, ``home``: the builders, pure functions of a model's ``ModelDocs``
  (graph, config, totals and provenance's evidence) and its ``ModelContext`` (what other stages add);
  ``table``, the home page's side-by-side table; ``compare``, which pairs get a compare page and the view model
  of each (from ``archviz.diff.compare``);
- ``render``: pure functions passing one view model to one Jinja2 template, and ``site_files``, every
  file of the site as text;
- ``publish``: ``write_site``, the only writer. It renders the whole site into a staging folder beside
  the destination and then swaps it into place, so a failed run leaves the previous site as it was.

Templates only display: every decision (what to show, in which order, how a number reads) is made by the
builders.

Site layout, every link relative so that the site works from ``file://``::

    index.html                   home: every model side by side, the compare pages, each model's headline numbers
    compare/A/B.html             one compare page per pair: B read as the change from A
    MODEL/index.html             overview: figures, diagram, parameter chart, layer map, groups, config
    MODEL/nodes/NODE_ID.html     one card per graph node
    assets/archviz.css           styles, syntax-highlighting classes included
    assets/archviz.js            search box and prefill/decode toggle
    assets/compare.css, .js      the compare pages' and the side-by-side table's styles; sorting the table
    search-index.js              the search index as a script assigning ``window.ARCHVIZ_SEARCH_INDEX``
    .archviz-site                marks the folder as a site the publisher may replace

This package must not import torch or transformers.
"""

from archviz.site.cards import build_card_view
from archviz.site.formatting import script_json
from archviz.site.home import build_home_view, build_search_index
from archviz.site.index import SITE_MARKER, ModelContext, ModelIndex, model_slugs
from archviz.site.overview import build_overview_view
from archviz.site.overview_views import OverviewView
from archviz.site.publish import write_site
from archviz.site.render import (
    ASSETS,
    RenderContext,
    make_environment,
    render_card,
    render_context,
    render_home,
    render_overview,
    site_files,
)
from archviz.site.views import CardView, HomeView

__all__ = [
    "ASSETS",
    "SITE_MARKER",
    "CardView",
    "HomeView",
    "ModelContext",
    "ModelIndex",
    "OverviewView",
    "RenderContext",
    "build_card_view",
    "build_home_view",
    "build_overview_view",
    "build_search_index",
    "make_environment",
    "model_slugs",
    "render_card",
    "render_context",
    "render_home",
    "render_overview",
    "script_json",
    "site_files",
    "write_site",
]
