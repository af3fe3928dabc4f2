"""Exports for other tools: the data-flow diagram as SVG (laid out as the site lays it out), as the DOT it is laid
out from, as a Mermaid flowchart, and the graph as the ``inspect --json`` document (``archviz.inspect/1``)."""

from __future__ import annotations

from enum import StrEnum

from archviz.pipeline import ModelDocs
from archviz.present.documents import inspect_document
from archviz.present.jsontext import json_text
from archviz.present.mermaid import mermaid_flowchart
from archviz.site.diagram import NO_LINKS, diagram_dot, standalone_svg


class ExportFormat(StrEnum):
    """What ``archviz export`` writes."""

    SVG = "svg"
    """The site's diagram as a standalone SVG file."""
    DOT = "dot"
    """The Graphviz DOT the diagram is laid out from."""
    MERMAID = "mermaid"
    """The same data flow as a Mermaid flowchart (Mermaid lays it out)."""
    JSON = "json"
    """The graph: the ``inspect --json`` document."""


def export_text(docs: ModelDocs, export_format: ExportFormat) -> str:
    """The model in ``export_format``, as the text of a file."""
    if export_format is ExportFormat.SVG:
        return standalone_svg(docs.graph)
    if export_format is ExportFormat.DOT:
        return diagram_dot(docs.graph, NO_LINKS)
    if export_format is ExportFormat.MERMAID:
        return mermaid_flowchart(docs.graph)
    return json_text(inspect_document(docs))
