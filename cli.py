"""The ``archviz`` command line."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console

from archviz.errors import InputError
from archviz.pipeline import describe_model
from archviz.report import graph_json, render_tree
from archviz.shapes import Phase

app = typer.Typer(
    name="archviz",
    help="Architecture documentation for Hugging Face models: typed graphs, exact parameter counts, provenance.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ModelArgument = Annotated[
    str,
    typer.Argument(
        metavar="MODEL",
        help="A bundled model name (kimi-k2-instruct), a folder holding config.json, a config.json, or a Hub repo id.",
    ),
]
RevisionOption = Annotated[str | None, typer.Option("--revision", help="Branch, tag or commit of a Hub repo id.")]


@app.callback()
def _root() -> None:
    """archviz: read large-model architectures from their config, code and checkpoint."""


def _fail(error: InputError) -> typer.Exit:
    """Bad input: one line on stderr, exit code 2."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"archviz: error: {error}", markup=False)
    return typer.Exit(code=2)


@app.command()
def inspect(
    model: ModelArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print the graph as JSON (schema in the README).")] = False,
    decode: Annotated[bool, typer.Option("--decode", help="Show single-token decode shapes (T = 1).")] = False,
    revision: RevisionOption = None,
) -> None:
    """Show every operator and tensor state of MODEL's forward pass, with shapes and parameter counts."""
    try:
        docs = describe_model(model, revision=revision)
    except InputError as error:
        raise _fail(error) from None
    if as_json:
        sys.stdout.write(json.dumps(graph_json(docs.graph, docs.totals), indent=2, ensure_ascii=False) + "\n")
        return
    Console().print(render_tree(docs.graph, docs.totals, Phase.DECODE if decode else Phase.PREFILL))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
