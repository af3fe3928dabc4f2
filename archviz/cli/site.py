"""``diff`` and ``render``: two models compared, and the static site."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from archviz.cli.app import SourceOption, TrustOption, _checkpoint_location, _fail, _pair, _source, _stdout
from archviz.common.errors import InputError
from archviz.common.words import plural

if TYPE_CHECKING:  # the pipeline and rich are imported by the commands that use them, not by `archviz --help`
    pass


def diff(
    model_a: Annotated[str, typer.Argument(metavar="A", help="The first model, named as for inspect.")],
    model_b: Annotated[str, typer.Argument(metavar="B", help="The second model; read as the change from A.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON (contract in the README).")
    ] = False,
    revision_a: Annotated[
        str | None, typer.Option("--revision-a", help="Branch, tag or commit of A's Hub repo.")
    ] = None,
    revision_b: Annotated[
        str | None, typer.Option("--revision-b", help="Branch, tag or commit of B's Hub repo.")
    ] = None,
) -> None:
    """Compare two models (or two revisions of one repo): config keys, nodes, layer map, totals, in words.

    Exit 0 when the architectures are the same (config keys may still differ), 1 when they differ, 2 on bad input.
    """
    from archviz.diff.compare import diff_models
    from archviz.pipeline import describe_model
    from archviz.present.diff_report import render_diff
    from archviz.present.diff_words import summarise
    from archviz.present.json_documents import diff_json
    from archviz.present.jsontext import json_text

    try:
        a_docs = describe_model(model_a, revision=revision_a)
        b_docs = describe_model(model_b, revision=revision_b)
        compared = diff_models(a_docs, b_docs)
    except InputError as error:
        raise _fail(error) from None
    summary = summarise(compared, a_docs, b_docs)
    if as_json:
        sys.stdout.write(json_text(diff_json(compared, summary)))
    else:
        _stdout().print(render_diff(compared, summary))
    raise typer.Exit(code=1 if compared.differs else 0)


def render(
    models: Annotated[
        list[str] | None,
        typer.Argument(metavar="[MODEL]...", help="Models to render; the bundled models when none are given."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="The site folder to write.")] = Path("site"),
    template_dir: Annotated[
        Path | None, typer.Option("--template-dir", help="A folder of templates searched before the built-in ones.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT even if it exists and is not an archviz site.")
    ] = False,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Skip the meta-model and checkpoint verification (no torch needed).")
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, help="Models verified at once, in worker processes (default: the cores)."),
    ] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Fail at once if another render is writing OUT, instead of waiting.")
    ] = False,
    trust_remote_code: TrustOption = False,
    source: SourceOption = "auto",
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            metavar="A:B",
            help="Write a compare page for models A and B (as named in MODEL, or by folder name). Repeatable. "
            "Without it, the models of each family are compared pairwise when the family has at most 4 models.",
        ),
    ] = None,
    gallery: Annotated[
        Path | None,
        typer.Option(
            "--gallery",
            metavar="OUT",
            help="Build the gallery of released configs shipped with archviz into OUT instead: a sortable table of "
            "every model, trait filters, the lineage of each line of models, and a comparison of any two.",
        ),
    ] = None,
) -> None:
    """Build the static documentation site for MODELs into OUT (written whole, then moved into place).

    Progress goes to standard error when it is a terminal. Two renders into one OUT take turns.
    """
    from archviz.inputs.resolve import BUNDLED, GALLERY_PREFIX
    from archviz.present.terminal import SafeConsole
    from archviz.site.batch import RenderRequest, default_jobs, render_site
    from archviz.site.progress import PlainReporter, RichReporter

    console = SafeConsole(stderr=True, highlight=False, emoji=False)
    try:
        entries = None
        if gallery is not None:
            if models or compare:
                raise InputError("renders the gallery's own models: give no MODEL and no --compare", path="--gallery")
            from archviz.gallery import gallery_entries

            entries = gallery_entries()
            out = gallery
        names = (
            tuple(f"{GALLERY_PREFIX}{entry.slug}" for entry in entries) if entries else tuple(models or sorted(BUNDLED))
        )
        request = RenderRequest(
            names=names,
            gallery=entries,
            out=out,
            template_dir=template_dir,
            force=force,
            verify=not no_verify,
            trust_remote_code=trust_remote_code,
            source=_source(source),
            jobs=jobs or default_jobs(),
            wait=not no_wait,
            compare=None if compare is None else tuple(_pair(item) for item in compare),
        )
        if console.is_terminal:
            with RichReporter(console) as reporter:
                written = render_site(request, locate=_checkpoint_location, reporter=reporter)
        else:
            written = render_site(request, locate=_checkpoint_location, reporter=PlainReporter(console))
    except InputError as error:
        raise _fail(error) from None
    console.print(f"wrote {out} ({plural(written, 'model')})", markup=False)
