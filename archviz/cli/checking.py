"""``check`` and ``manifest``: the verification legs and the checkpoint's tensor list."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from archviz.cli.app import (
    AssumeOption,
    CheckpointOption,
    FromCodeOption,
    ModelArgument,
    PartialOption,
    Reading,
    RevisionOption,
    SourceOption,
    TrustOption,
    _checkpoint_location,
    _describe,
    _fail,
    _stdout,
)
from archviz.common.errors import InputError, doing, printable
from archviz.common.files import write_atomically

if TYPE_CHECKING:  # the pipeline and rich are imported by the commands that use them, not by `archviz --help`
    from archviz.pipeline import ModelDocs
    from archviz.verify.check import Verification


AGREE, DISAGREE, BAD_INPUT, UNVERIFIED, INTERNAL_ERROR = 0, 1, 2, 3, 4
"""``archviz check``'s exit codes (``--allow-unverified`` turns ``UNVERIFIED`` into 0). A partial verdict (everything
agrees, but the graph leaves parts of the config out) exits ``UNVERIFIED`` too: the whole model was not verified."""


def check(
    model: ModelArgument,
    checkpoint: CheckpointOption = None,
    revision: RevisionOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Also fail on what could not be checked: tensor states without a shape check, nodes whose source "
            "was not located, MTP layers the checkpoint lacks.",
        ),
    ] = False,
    no_meta: Annotated[bool, typer.Option("--no-meta", help="Skip the meta-device model (no torch needed).")] = False,
    allow_unverified: Annotated[
        bool,
        typer.Option(
            "--allow-unverified",
            help="Exit 0, not 3, when no leg independent of the graph could run (a partial config, no checkpoint), or "
            "when what ran agrees on the modelled part of a model the graph describes only in part.",
        ),
    ] = False,
    junit_xml: Annotated[
        Path | None,
        typer.Option(
            "--junit-xml", metavar="FILE", help="Also write a JUnit XML report: a test case per leg and node."
        ),
    ] = None,
    context: Annotated[
        int | None,
        typer.Option(
            "--context",
            min=1,
            help="Also run the FLOP count and the cache object at this many cached positions (they always run at "
            "small sizes and past the model's longest window, chunk or threshold).",
        ),
    ] = None,
    trust_remote_code: TrustOption = False,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
    from_code: FromCodeOption = False,
) -> None:
    """Verify MODEL leg by leg: analytic graph, meta-device model, shape trace, FLOP count, cache object, checkpoint.

    Exit codes: 0 agree (a leg independent of the graph ran and everything that ran agrees), 1 disagree, 2 bad
    input, 3 unverified (nothing independent ran) or partial (what ran agrees, but the graph leaves parts of the
    config out; both 0 with --allow-unverified), 4 internal error (a bug in archviz).
    """
    from archviz.present.json_documents import verification_json
    from archviz.present.jsontext import json_text
    from archviz.present.report import render_verification
    from archviz.verify.check import verify
    from archviz.verify.checkpoint import read_checkpoint
    from archviz.verify.costcheck import witness_context

    witness_context(context, path="--context")
    with doing("describing the model"):
        # check's flag is the meta leg's too: reading uses it only with --from-code, and does not refuse it without
        trusted = from_code and trust_remote_code
        reading = Reading(revision, assume, partial, from_code=from_code, trust_remote_code=trusted)
        docs = _describe(model, reading, source=source)
    with doing("reading the checkpoint"):
        location = _checkpoint_location(docs, checkpoint)
        held = read_checkpoint(location, revision=revision) if location is not None else None
    with doing("verifying the graph"):
        verification = verify(
            docs, checkpoint=held, run_meta=not no_meta, trust_remote_code=trust_remote_code, context=context
        )
    if as_json:
        sys.stdout.write(json_text(verification_json(verification, strict=strict)))
    else:
        _stdout().print(render_verification(model, verification, strict=strict))
    if junit_xml is not None:
        _write_junit(junit_xml, model, docs, verification, strict=strict, allow_unverified=allow_unverified)
    raise typer.Exit(code=_check_exit_code(docs, verification, strict=strict, allow_unverified=allow_unverified))


def _write_junit(
    path: Path, model: str, docs: ModelDocs, verification: Verification, *, strict: bool, allow_unverified: bool
) -> None:
    from archviz.present.junit import junit_xml

    text = junit_xml(model, docs.graph, verification, strict=strict, allow_unverified=allow_unverified)
    write_atomically(path, text, what="the JUnit report")


def _check_exit_code(docs: ModelDocs, verification: Verification, *, strict: bool, allow_unverified: bool) -> int:
    """The exit code, with one line on stderr for each --strict failure and for an internal error in a leg."""
    from archviz.present.terminal import SafeConsole
    from archviz.provenance.sources import coverage
    from archviz.verify.legs import Outcome

    console = SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    if verification.internal_error:
        failed = next(leg for leg in verification.legs if leg.internal_error)
        console.print(
            printable(
                f"archviz: internal error (a bug in archviz, not a problem with the input) in the {failed.name} "
                f"leg: {failed.reason}"
            ),
            markup=False,
        )
        return INTERNAL_ERROR
    unlocated = coverage(docs.sources).unlocated if strict else ()
    # What --strict fails on besides disagreements: the gaps legs report, and nodes whose source was not located.
    gaps = [item.message for leg in verification.legs for item in leg.findings if item.strict_only] if strict else []
    gaps += [f"{node}: {docs.sources.nodes[node].reason or 'source not located'}" for node in unlocated]
    for gap in gaps:
        console.print(printable(f"archviz: strict: {gap}"), markup=False)
    result = verification.outcome(strict=strict)
    if result is Outcome.DISAGREE or unlocated:
        return DISAGREE
    if result in (Outcome.UNVERIFIED, Outcome.PARTIAL):
        return AGREE if allow_unverified else UNVERIFIED
    return AGREE


def manifest(
    model: ModelArgument,
    output: Annotated[Path, typer.Option("--output", "-o", help="The manifest file to write; - for standard output.")],
    predicted: Annotated[
        bool, typer.Option("--predicted", help="Write the graph's predicted checkpoint instead of a real one.")
    ] = False,
    checkpoint: CheckpointOption = None,
    revision: RevisionOption = None,
) -> None:
    """Write the tensor names, shapes and dtypes of MODEL's checkpoint (or, --predicted, of the graph's)."""
    from archviz.pipeline import describe_model
    from archviz.present.terminal import SafeConsole
    from archviz.verify.checkpoint import read_checkpoint, write_manifest
    from archviz.verify.predicted import predicted_checkpoint

    try:
        docs = describe_model(model, revision=revision)
        if predicted:
            held = predicted_checkpoint(docs)
        else:
            location = _checkpoint_location(docs, checkpoint)
            if location is None:
                raise InputError("no checkpoint to read: pass --checkpoint, or --predicted for the graph's", path=model)
            held = read_checkpoint(location, revision=revision)
        text = write_manifest(held)
        if str(output) != "-":
            write_atomically(output, text, what="the manifest")
    except InputError as error:
        raise _fail(error) from None
    if str(output) == "-":
        sys.stdout.write(text)
        return
    SafeConsole(stderr=True, emoji=False).print(f"wrote {len(held.tensors):,} tensors to {output}", markup=False)
