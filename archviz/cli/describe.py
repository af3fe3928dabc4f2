"""``inspect``, ``card`` and ``export``: the graph, a model card's section, a diagram or the graph as data."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from archviz.cli.app import (
    AssumeOption,
    FromCodeOption,
    ModelArgument,
    PartialOption,
    Reading,
    ReadTrustOption,
    RevisionOption,
    SourceOption,
    _assumptions,
    _describe,
    _fail,
    _source,
    _stdout,
)
from archviz.common.errors import InputError, doing
from archviz.common.files import write_atomically

if TYPE_CHECKING:  # the pipeline and rich are imported by the commands that use them, not by `archviz --help`
    pass


def inspect(
    model: ModelArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the graph as JSON (schema in the README).")] = False,
    decode: Annotated[bool, typer.Option("--decode", help="Show single-token decode shapes (T = 1).")] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
    from_code: FromCodeOption = False,
    trust_remote_code: ReadTrustOption = False,
) -> None:
    """Show every operator and tensor state of MODEL's forward pass, with shapes and parameter counts."""
    from archviz.present.jsontext import json_text

    try:
        reading = Reading(revision, assume, partial, from_code=from_code, trust_remote_code=trust_remote_code)
        docs = _describe(model, reading, source=source)
    except InputError as error:
        raise _fail(error) from None
    if as_json:
        from archviz.present.documents import inspect_document

        sys.stdout.write(json_text(inspect_document(docs)))
        return
    from archviz.graph.shapes import Phase
    from archviz.present.report import render_tree

    _stdout().print(render_tree(docs.graph, docs.totals, Phase.DECODE if decode else Phase.PREFILL))


def card(
    model: ModelArgument,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown for the Hub's README.md (the only format so far: the default).")
    ] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo",
            metavar="ORG/NAME",
            help="The Hub repo the card is for, named and linked as where the config is from (for a local folder).",
        ),
    ] = None,
) -> None:
    """Print an "Architecture" section for MODEL's model card: figures, layer map, cost, a Mermaid diagram, sources.

    Every number is the one `inspect --json` gives.
    """
    from archviz.inputs.resolve import is_repo_id
    from archviz.pipeline import describe_model
    from archviz.present.card import model_card

    del markdown  # Markdown is the only format; the flag names it, as the README's command line does

    try:
        if repo is not None and not is_repo_id(repo):
            raise InputError("--repo takes a Hub repo id of the form org/name", path=repo)
        docs = describe_model(
            model, revision=revision, assumptions=_assumptions(assume), partial=partial, source=_source(source)
        )
        known = docs.graph.model.repo
        if repo is not None and known is not None and known != repo:
            raise InputError(f"the card is of the Hub repo {known}; --repo names another ({repo})", path=model)
    except InputError as error:
        raise _fail(error) from None
    sys.stdout.write(model_card(docs, repo=repo))


def export(
    model: ModelArgument,
    export_format: Annotated[
        str, typer.Option("--format", help="svg or dot (the site's diagram), mermaid, or json (the graph).")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="The file to write; - (the default) for standard output.")
    ] = None,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
) -> None:
    """Write MODEL's data-flow diagram (svg, dot, mermaid) or its graph (json, the `inspect --json` document)."""
    from archviz.pipeline import describe_model
    from archviz.present.export import ExportFormat, export_text

    if export_format not in tuple(ExportFormat):
        raise InputError(f"expected one of {', '.join(ExportFormat)}", path=f"--format {export_format}")
    docs = describe_model(
        model, revision=revision, assumptions=_assumptions(assume), partial=partial, source=_source(source)
    )
    with doing("exporting"):
        text = export_text(docs, ExportFormat(export_format))
    if output is None or str(output) == "-":
        sys.stdout.write(text)
    else:
        write_atomically(output, text, what="the export")
