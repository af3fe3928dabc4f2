"""The ``archviz`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from archviz.errors import InputError
from archviz.graph import Assumption
from archviz.pipeline import ModelDocs, describe_model
from archviz.report import graph_json, render_tree, render_verification, verification_json
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
AssumeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--assume",
        metavar="KEY=VALUE",
        help="Supply a value the config lacks (JSON, e.g. hidden_size=7168); shown as an assumption. Repeatable.",
    ),
]
PartialOption = Annotated[
    bool,
    typer.Option("--partial", help="Build what an incomplete config allows and list the rest as not modelled."),
]
SourceOption = Annotated[
    str,
    typer.Option(
        "--source",
        help="Which modeling file to cite: auto (the model's own remote code when its folder has it, else "
        "transformers'), remote, or transformers. Source is only read, never imported.",
    ),
]
RevisionOption = Annotated[str | None, typer.Option("--revision", help="Branch, tag or commit of a Hub repo id.")]


@app.callback()
def _root() -> None:
    """archviz: read large-model architectures from their config, code and checkpoint."""


def _assumptions(items: list[str] | None) -> list[Assumption]:
    """``KEY=VALUE`` pairs as assumptions; VALUE is JSON, or else taken as a string."""
    parsed: list[Assumption] = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError("expected KEY=VALUE", path=f"--assume {item}")
        try:
            text = json.dumps(json.loads(value))
        except json.JSONDecodeError:
            text = json.dumps(value)
        parsed.append(Assumption(key=key.strip(), value=text, source="--assume on the command line"))
    return parsed


def _source(choice: str) -> str:
    from archviz.sources import PREFERENCES

    if choice not in PREFERENCES:
        raise InputError(f"--source must be one of {', '.join(PREFERENCES)}", path=f"--source {choice}")
    return choice


def _stdout() -> Console:
    """The report console; piped to a file or a CI log, it is 120 columns wide rather than rich's 80."""
    return Console() if sys.stdout.isatty() else Console(width=120)


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
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
) -> None:
    """Show every operator and tensor state of MODEL's forward pass, with shapes and parameter counts."""
    try:
        docs = describe_model(
            model, revision=revision, assumptions=_assumptions(assume), partial=partial, source=_source(source)
        )
    except InputError as error:
        raise _fail(error) from None
    if as_json:
        from archviz.cost import DEFAULT_SIZES, model_cost
        from archviz.costs_report import cost_json

        document = graph_json(docs.graph, docs.totals, docs.sources)
        document["cost"] = cost_json(model_cost(docs.graph, docs.totals, DEFAULT_SIZES), docs.graph, docs.totals)
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        return
    _stdout().print(render_tree(docs.graph, docs.totals, Phase.DECODE if decode else Phase.PREFILL))


@app.command()
def cost(
    model: ModelArgument,
    prompt: Annotated[int, typer.Option("--prompt", min=1, help="Prompt length T of the prefill.")] = 2048,
    context: Annotated[int, typer.Option("--context", min=0, help="Cached positions S when decoding.")] = 131_072,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Sequences B.")] = 1,
    cache_dtype: Annotated[
        str | None, typer.Option("--cache-dtype", help="dtype of the cache (bfloat16, float8_e4m3fn, ...).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the costs as JSON (schema in the README).")] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
) -> None:
    """What MODEL costs to run: FLOPs for a prompt and per decoded token, weight bytes, cache and state bytes."""
    from archviz.cost import Sizes, cache_dtype_name, model_cost
    from archviz.costs_report import cost_json, render_cost

    try:
        docs = describe_model(model, revision=revision, assumptions=_assumptions(assume), partial=partial)
        dtype = cache_dtype_name(cache_dtype) if cache_dtype is not None else None
    except InputError as error:
        raise _fail(error) from None
    report = model_cost(docs.graph, docs.totals, Sizes(batch=batch, prompt=prompt, context=context), cache_dtype=dtype)
    if as_json:
        sys.stdout.write(json.dumps(cost_json(report, docs.graph, docs.totals), indent=2, ensure_ascii=False) + "\n")
        return
    _stdout().print(render_cost(model, report, docs.graph, docs.totals))


CheckpointOption = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        help="A .safetensors file, a folder of shards, a manifest written by `archviz manifest`, or a Hub repo id.",
    ),
]
TrustOption = Annotated[
    bool, typer.Option("--trust-remote-code", help="Allow importing the model folder's own modeling code.")
]


def _checkpoint_location(docs: ModelDocs, checkpoint: str | None) -> str | None:
    """--checkpoint, else the Hub repo's (HF cache first), else the model folder's own safetensors."""
    from archviz.verify import find_local_checkpoint

    if checkpoint is not None:
        return checkpoint
    if docs.source.repo is not None and not docs.source.bundled:
        return docs.source.repo
    return find_local_checkpoint(docs.source.folder)


@app.command()
def check(
    model: ModelArgument,
    checkpoint: CheckpointOption = None,
    revision: RevisionOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Also fail on tensor states whose shapes could not be checked.")
    ] = False,
    no_meta: Annotated[bool, typer.Option("--no-meta", help="Skip the meta-device model (no torch needed).")] = False,
    trust_remote_code: TrustOption = False,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
) -> None:
    """Verify MODEL three ways: analytic graph, meta-device model, checkpoint tensors. Exit 1 on disagreement.

    With --strict, also fail when a tensor state's shape could not be checked or a node's source was not located.
    """
    from archviz.checkpoint import read_checkpoint
    from archviz.sources import coverage
    from archviz.verify import verify

    try:
        docs = describe_model(
            model, revision=revision, assumptions=_assumptions(assume), partial=partial, source=_source(source)
        )
        location = _checkpoint_location(docs, checkpoint)
        held = read_checkpoint(location, revision=revision) if location is not None else None
        verification = verify(docs, checkpoint=held, run_meta=not no_meta, trust_remote_code=trust_remote_code)
    except InputError as error:
        raise _fail(error) from None
    if as_json:
        sys.stdout.write(json.dumps(verification_json(verification), indent=2, ensure_ascii=False) + "\n")
    else:
        _stdout().print(render_verification(model, verification))
    unlocated = coverage(docs.sources).unlocated
    unshaped = [item for item in verification.unchecked if item.startswith("shape of")]
    if strict and (unlocated or unshaped):
        console = Console(stderr=True, highlight=False, soft_wrap=True)
        for node in unlocated:
            reason = docs.sources.nodes[node].reason or "source not located"
            console.print(f"archviz: strict: {node}: {reason}", markup=False)
        for item in unshaped:
            console.print(f"archviz: strict: {item}", markup=False)
    failed = not verification.agrees or (strict and bool(unlocated or unshaped))
    raise typer.Exit(code=1 if failed else 0)


@app.command()
def manifest(
    model: ModelArgument,
    output: Annotated[Path, typer.Option("--output", "-o", help="The manifest file to write.")],
    predicted: Annotated[
        bool, typer.Option("--predicted", help="Write the graph's predicted checkpoint instead of a real one.")
    ] = False,
    checkpoint: CheckpointOption = None,
    revision: RevisionOption = None,
) -> None:
    """Write the tensor names, shapes and dtypes of MODEL's checkpoint (or, --predicted, of the graph's)."""
    from archviz.checkpoint import read_checkpoint, write_manifest
    from archviz.verify import predicted_checkpoint

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
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as error:
            raise InputError(f"cannot write the manifest: {error.strerror or error}", path=str(output)) from None
    except InputError as error:
        raise _fail(error) from None
    Console(stderr=True).print(f"wrote {len(held.tensors):,} tensors to {output}", markup=False)


@app.command()
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
    trust_remote_code: TrustOption = False,
    source: SourceOption = "auto",
) -> None:
    """Build the static documentation site for MODELs into OUT (written whole, then moved into place)."""
    from archviz.checkpoint import read_checkpoint
    from archviz.resolve import BUNDLED
    from archviz.site import ModelContext, write_site
    from archviz.verify import verification_sentence, verify

    names = models or sorted(BUNDLED)
    try:
        described = [describe_model(name, source=_source(source)) for name in names]
        contexts: dict[str, ModelContext] = {}
        for docs in described:
            sentence = None
            if not no_verify:
                location = _checkpoint_location(docs, None)
                held = read_checkpoint(location) if location is not None else None
                sentence = verification_sentence(verify(docs, checkpoint=held, trust_remote_code=trust_remote_code))
            contexts[docs.graph.model.name] = ModelContext(verification=sentence)
        write_site(described, out, template_dir=template_dir, force=force, contexts=contexts)
    except InputError as error:
        raise _fail(error) from None
    Console(stderr=True).print(f"wrote {out} ({len(described)} models)", markup=False)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
