"""The ``archviz`` command line."""

from __future__ import annotations

import copy
import json
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click import Command, Context  # the context TyperGroup's methods take (typer vendors click)
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import TyperGroup, _TyperParameter
from typer.exceptions import TyperException

from archviz.common.errors import InputError, doing, printable, step_of
from archviz.common.files import write_atomically
from archviz.common.process import collect_less
from archviz.common.words import plural
from archviz.cost import MAX_BATCH, MAX_POSITIONS
from archviz.graph.nodes import Assumption
from archviz.inputs.config import MAX_CONFIG_DEPTH, nesting_depth

if TYPE_CHECKING:  # the pipeline and rich are imported by the commands that use them, not by `archviz --help`
    from archviz.pipeline import ModelDocs
    from archviz.present.terminal import SafeConsole
    from archviz.verify.check import Verification

DEBUG = "archviz.debug"
"""``Context.meta`` key: whether ``--debug`` was given (a traceback with an internal error)."""


class _Commands(TyperGroup):
    """The commands, with the error handling they all share.

    Bad input (``InputError``) is one line on stderr and exit code 2; any other exception is a bug in archviz: one
    line saying so and what archviz was doing, exit code 4, and the traceback with ``--debug`` (accepted anywhere
    on the command line, before a ``--``).
    """

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            ctx.meta[DEBUG] = True
            args = [arg for arg in args[:end] if arg != "--debug"] + args[end:]
        for param in self.get_params(ctx):  # with the help option
            _coerce_plainly(param)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        for param in () if command is None else command.get_params(ctx):  # the help option as the group's
            _coerce_plainly(param)
        return name, command, rest

    def invoke(self, ctx: Context) -> Any:
        real = sys.stdout
        sys.stdout = _StandardOutput(real)  # a stand-in with the stream's methods
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a full disk shows here, while it can still be reported
            return result
        except (typer.Exit, typer.Abort, TyperException, KeyboardInterrupt):
            raise
        except InputError as error:
            if isinstance(error, _UnwritableOutput) and real is not None:
                os.dup2(os.open(os.devnull, os.O_WRONLY), real.fileno())  # nothing left for the exit's flush to fail on
            raise _fail(error) from None
        except BrokenPipeError:  # the reader stopped early (``archviz inspect … | head``): nothing more to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(code=0) from None
        except Exception as error:  # anything else is archviz's own bug: said so, never blamed on the input
            raise _internal_error(error, debug=bool(ctx.meta.get(DEBUG))) from None
        finally:
            sys.stdout = real


class _UnwritableOutput(InputError):
    """Standard output is closed, or refused a write (a full disk, ``> /dev/full``): the caller's setup, exit 2."""


class _StandardOutput:
    """Standard output as the commands see it: a failed write or flush is ``_UnwritableOutput``, not an internal
    error; a closed standard output (``>&-``, where Python's ``sys.stdout`` is ``None``) is said so at the first use.
    A reader that stops early (``BrokenPipeError``) is left to the caller."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise _UnwritableOutput("the stream is closed", path="standard output")
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        try:
            return int(self.__getattr__("write")(text))
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _unwritable(error) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise _unwritable(error) from None


def _unwritable(error: OSError) -> _UnwritableOutput:
    return _UnwritableOutput(f"cannot write: {error.strerror or error}", path="standard output")


@dataclass(frozen=True)
class _PlainParam(RuntimeParam):
    """Typer's coercion of a plain ``str``, ``bool`` or ``list[str]`` option, without pydantic.

    typer builds a pydantic ``TypeAdapter`` for every option it coerces (importing pydantic costs a tenth of a second
    at every start); for these three types the command line's strings are already the value, as pydantic would return
    them. Anything else (an environment variable's text for a flag) goes to typer's own coercion.
    """

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        if self.annotation is str and isinstance(value, str):
            return value
        if self.annotation is bool and isinstance(value, bool):
            return value
        if self.annotation == list[str] and isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return list(value)
        return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def _coerce_plainly(param: object) -> None:
    """Give a plain ``str``, ``bool`` or ``list[str]`` parameter ``_PlainParam`` before typer builds its own; and a
    flag no metavar (typer's help shows ``<bool>`` after a flag that takes no value)."""
    if getattr(param, "is_flag", False) and getattr(param, "metavar", "") is None:
        param.metavar = ""  # type: ignore[attr-defined]
    if not isinstance(param, _TyperParameter) or param._runtime_param is not None:
        return
    descriptor = param.type_descriptor
    info = descriptor.parameter_info
    plain = descriptor.annotation in (str, bool, list[str]) and not (
        descriptor.is_file or descriptor.is_path or descriptor.is_choice or info.parser is not None
    )
    if plain:
        param._runtime_param = _PlainParam(annotation=descriptor.annotation, parameter_info=info)


app = typer.Typer(
    name="archviz",
    cls=_Commands,
    help="Architecture documentation for Hugging Face models: typed graphs, exact parameter counts, provenance.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
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
FromCodeOption = Annotated[
    bool,
    typer.Option(
        "--from-code",
        help="Read the graph off the modeling code on the meta device even where a hand-written family exists: "
        "the model's own code (its config's auto_map) with --trust-remote-code, else transformers'.",
    ),
]


def _print_version(value: bool) -> None:
    """``--version``: archviz's version and the transformers and torch versions its line numbers depend on."""
    if value:
        from archviz.common.versions import installed_versions, version_line

        sys.stdout.write(version_line(installed_versions()) + "\n")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an internal error (exit code 4).")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print archviz's version, and the transformers and torch versions the line numbers depend on.",
        ),
    ] = False,
) -> None:
    """archviz: read large-model architectures from their config, code and checkpoint."""


def _assumptions(items: list[str] | None) -> list[Assumption]:
    """``KEY=VALUE`` pairs as assumptions; VALUE is JSON, or else taken as a string."""
    parsed: list[Assumption] = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError("expected KEY=VALUE", path=f"--assume {item}")
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            decoded = value
        except (ValueError, RecursionError):  # a number of more digits than Python converts; `[[[[…` too deep
            raise InputError(
                "VALUE is not JSON archviz can read (a number too long, or nested too deeply)", path=f"--assume {key}"
            ) from None
        if nesting_depth(decoded) > MAX_CONFIG_DEPTH:
            raise InputError(f"VALUE nests more than {MAX_CONFIG_DEPTH} levels deep", path=f"--assume {key}")
        text = json.dumps(decoded)
        parsed.append(Assumption(key=key.strip(), value=text, source="--assume on the command line"))
    return parsed


def _source(choice: str) -> str:
    from archviz.provenance.sources import PREFERENCES

    if choice not in PREFERENCES:
        raise InputError(f"--source must be one of {', '.join(PREFERENCES)}", path=f"--source {choice}")
    return choice


def _stdout() -> SafeConsole:
    """The report console; piped to a file or a CI log, it is 120 columns wide rather than rich's 80."""
    from archviz.present.terminal import SafeConsole

    return SafeConsole(emoji=False) if sys.stdout.isatty() else SafeConsole(width=120, emoji=False)


def _fail(error: InputError) -> typer.Exit:
    """Bad input: one line on stderr, exit code 2."""
    from archviz.present.terminal import SafeConsole

    SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False).print(
        f"archviz: error: {error}", markup=False
    )
    return typer.Exit(code=2)


def _internal_error(error: BaseException, *, debug: bool) -> typer.Exit:
    """A bug in archviz: one line on stderr saying so and what archviz was doing; the traceback with --debug."""
    from archviz.present.terminal import SafeConsole

    console = SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    if debug:
        console.print("".join(traceback.format_exception(error)), markup=False, end="")
    step = step_of(error)
    said = str(error).strip().splitlines()[0] if str(error).strip() else ""
    line = (
        f"archviz: internal error (a bug in archviz, not a problem with the input)"
        f"{f' while {step}' if step else ''}: {type(error).__name__}{f': {said}' if said else ''}"
    )
    if not debug:
        line += "; run again with --debug for the traceback"
    console.print(printable(line), markup=False)
    return typer.Exit(code=4)


@app.command()
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
    from archviz.pipeline import describe_model
    from archviz.present.jsontext import json_text

    try:
        docs = describe_model(
            model,
            revision=revision,
            assumptions=_assumptions(assume),
            partial=partial,
            source=_source(source),
            from_code=from_code,
            trust_remote_code=_trusted(from_code, trust_remote_code),
        )
    except InputError as error:
        raise _fail(error) from None
    if as_json:
        from archviz.present.documents import inspect_document

        sys.stdout.write(json_text(inspect_document(docs)))
        return
    from archviz.graph.shapes import Phase
    from archviz.present.report import render_tree

    _stdout().print(render_tree(docs.graph, docs.totals, Phase.DECODE if decode else Phase.PREFILL))


MAX_RANKS = 2**20
"""Most GPUs, or ranks of one kind, ``plan`` takes (``--gpus``, ``--tp``, ``--ep``, ``--pp``, ``--dp``); a plan's work
is bounded further by ``archviz.cost.plan.MAX_RANK_GROUPS``."""
GPU_MEMORY_RANGE = (0.001, 65_536)
"""GiB ``--gpu-memory`` takes (the GPUs listed have 76 to 288)."""
BANDWIDTH_RANGE = (0.001, 1_000)
"""TB/s ``--bandwidth`` takes (the GPUs listed have 3.35 to 8)."""
THROUGHPUT_RANGE = (0.001, 1_000_000)
"""TFLOP/s ``--bf16``, ``--fp8`` and ``--fp4`` take (the GPUs listed have up to 10,066, FP4)."""


@app.command()
def cost(
    model: ModelArgument,
    prompt: Annotated[
        int, typer.Option("--prompt", min=1, max=MAX_POSITIONS, help="Prompt length T of the prefill.")
    ] = 2048,
    context: Annotated[
        int, typer.Option("--context", min=0, max=MAX_POSITIONS, help="Cached positions S when decoding.")
    ] = 131_072,
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_BATCH, help="Sequences B.")] = 1,
    cache_dtype: Annotated[
        str | None, typer.Option("--cache-dtype", help="dtype of the cache (bfloat16, float8_e4m3fn, ...).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the costs as JSON (schema in the README).")] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    from_code: FromCodeOption = False,
    trust_remote_code: ReadTrustOption = False,
) -> None:
    """What MODEL costs to run: FLOPs for a prompt and per decoded token, weight bytes, cache and state bytes."""
    from archviz.cost.cache import cache_dtype_name
    from archviz.cost.report import beyond_context, model_cost
    from archviz.cost.terms import Sizes
    from archviz.pipeline import describe_model
    from archviz.present.costs_report import cost_json, render_cost
    from archviz.present.jsontext import json_text

    try:
        docs = describe_model(
            model,
            revision=revision,
            assumptions=_assumptions(assume),
            partial=partial,
            from_code=from_code,
            trust_remote_code=_trusted(from_code, trust_remote_code),
        )
        dtype = cache_dtype_name(cache_dtype) if cache_dtype is not None else None
    except InputError as error:
        raise _fail(error) from None
    sizes = Sizes(batch=batch, prompt=prompt, context=context)
    report = model_cost(docs.graph, docs.totals, sizes, cache_dtype=dtype)
    beyond = beyond_context(sizes, docs.config) if report.priced else ()  # weights alone do not depend on T or S
    if as_json:
        document = cost_json(report, docs.graph, docs.totals, beyond=beyond)
        sys.stdout.write(json_text(document))
        return
    _stdout().print(render_cost(model, report, docs.graph, docs.totals, beyond=beyond))


def _gpu(
    name: str | None,
    memory: float | None,
    bandwidth: float | None,
    bf16: float | None,
    fp8: float | None,
    fp4: float | None,
) -> Any:
    """The table's GPU with the user's figures over it, or a GPU of the user's figures alone."""
    from dataclasses import replace

    from archviz.cost.gpus import Gpu, gpu_named

    if name is None:
        if memory is None or bandwidth is None or bf16 is None:
            raise InputError("name a GPU (--gpu h200) or give --gpu-memory, --bandwidth and --bf16", path="--gpu")
        base = Gpu(
            key="custom",
            title="your GPU",
            memory=0,
            bandwidth=0,
            bf16=0,
            fp8=None,  # unknown unless --fp8 gives it: never a zero to divide by
            fp4=None,
            interconnect=None,
            source="the command line",
        )
    else:
        base = gpu_named(name)
    for option, value, (least, most) in (
        ("--gpu-memory", memory, GPU_MEMORY_RANGE),
        ("--bandwidth", bandwidth, BANDWIDTH_RANGE),
        ("--bf16", bf16, THROUGHPUT_RANGE),
        ("--fp8", fp8, THROUGHPUT_RANGE),
        ("--fp4", fp4, THROUGHPUT_RANGE),
    ):
        if value is not None and not least <= value <= most:  # also refuses nan, which compares false
            raise InputError(f"must be a number from {least:g} to {most:,}", path=f"{option} {value:g}")
    changed: dict[str, Any] = {}
    if memory is not None:
        changed["memory"] = int(memory * 2**30)
        changed["memory_note"] = f"{memory:g} GiB, --gpu-memory"
    if bandwidth is not None:
        changed["bandwidth"] = int(bandwidth * 10**12)
    for key, value in (("bf16", bf16), ("fp8", fp8), ("fp4", fp4)):
        if value is not None:
            changed[key] = int(value * 10**12)
    if changed:
        changed["source"] = f"{base.source}; the command line for {', '.join(sorted(changed))}"
    return replace(base, **changed)


@app.command()
def plan(
    model: ModelArgument,
    gpu: Annotated[str | None, typer.Option("--gpu", help="h100, h200, b200, gb200, mi300x, mi325x or mi355x.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, max=MAX_RANKS, help="GPUs in all: tp × pp × dp.")] = None,
    tp: Annotated[
        int | None,
        typer.Option("--tp", min=1, max=MAX_RANKS, help="Tensor-parallel ranks (default: gpus / (pp × dp))."),
    ] = None,
    ep: Annotated[int, typer.Option("--ep", min=1, max=MAX_RANKS, help="Expert-parallel ranks: 1 or tp × dp.")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, max=MAX_RANKS, help="Pipeline stages.")] = 1,
    dp: Annotated[int, typer.Option("--dp", min=1, max=MAX_RANKS, help="Data-parallel replicas.")] = 1,
    context: Annotated[
        int, typer.Option("--context", min=0, max=MAX_POSITIONS, help="Cached positions S per sequence.")
    ] = 131_072,
    prompt: Annotated[
        int, typer.Option("--prompt", min=1, max=MAX_POSITIONS, help="Prompt length T of the prefill bound.")
    ] = 2048,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch", min=1, max=MAX_BATCH, help="Sequences per replica of the decode bound (default: those that fit)."
        ),
    ] = None,
    cache_dtype: Annotated[
        str | None, typer.Option("--cache-dtype", help="dtype of the cache (bf16, fp8, ...).")
    ] = None,
    compute: Annotated[
        str | None,
        typer.Option("--compute", help="Throughput of the bounds: bf16, fp8 or fp4 (default: the weights')."),
    ] = None,
    reserve: Annotated[
        float,
        typer.Option(
            "--reserve",
            min=0.0,
            max=0.99,
            help="Share of each GPU's memory kept for activations, runtime, fragmentation.",
        ),
    ] = 0.10,
    convention: Annotated[
        str, typer.Option("--convention", help="transformers (its own TP/EP plans) or engine (vLLM/SGLang attention).")
    ] = "transformers",
    gpu_memory: Annotated[float | None, typer.Option("--gpu-memory", help="Memory per GPU, GiB.")] = None,
    bandwidth: Annotated[float | None, typer.Option("--bandwidth", help="HBM bandwidth per GPU, TB/s.")] = None,
    bf16: Annotated[float | None, typer.Option("--bf16", help="Dense BF16 TFLOP/s per GPU.")] = None,
    fp8: Annotated[float | None, typer.Option("--fp8", help="Dense FP8 TFLOP/s per GPU.")] = None,
    fp4: Annotated[float | None, typer.Option("--fp4", help="Dense FP4 TFLOP/s per GPU.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON (archviz.plan/1, in the README).")
    ] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
) -> None:
    """Will MODEL fit: each GPU's weights under TP, EP and PP, the sequences that fit at a context, and lower bounds
    on a decode step and a prefill. Exit 2 for a plan the model cannot run or whose weights do not fit; weights
    that fit with no room for a sequence at the context are reported (0 sequences), not refused."""
    from archviz.cost.cache import cache_dtype_name
    from archviz.cost.parallel_plans import Convention, restated_plans
    from archviz.cost.plan import PlanRequest, plan_deployment
    from archviz.cost.sharding import Parallelism
    from archviz.pipeline import describe_model
    from archviz.present.jsontext import json_text
    from archviz.present.plan_report import plan_json, render_plan

    device = _gpu(gpu, gpu_memory, bandwidth, bf16, fp8, fp4)
    if convention not in tuple(Convention):
        raise InputError(f"--convention must be one of {', '.join(Convention)}", path=f"--convention {convention}")
    if compute is not None and compute not in ("bf16", "fp8", "fp4"):
        raise InputError("--compute must be bf16, fp8 or fp4", path=f"--compute {compute}")
    if tp is None:
        total = gpus if gpus is not None else pp * dp
        if total % (pp * dp):
            raise InputError(f"--gpus {total} is not a multiple of pp × dp = {pp * dp}", path=f"--gpus {total}")
        tp = total // (pp * dp)
    if gpus is not None and gpus != tp * pp * dp:
        raise InputError(f"--gpus {gpus} is not tp × pp × dp = {tp * pp * dp}", path=f"--gpus {gpus}")
    docs = describe_model(model, revision=revision, assumptions=_assumptions(assume))
    plans = None
    if restated_plans(docs.graph, docs.family) is None:  # read off transformers' classes
        from archviz.verify.meta import parallel_plans

        with doing("reading transformers' parallel plans"):
            plans = parallel_plans(docs.graph.model.transformers_model_type)
    request = PlanRequest(
        gpu=device,
        parallelism=Parallelism(tp=tp, ep=ep, pp=pp, dp=dp),
        convention=Convention(convention),
        context=context,
        prompt=prompt,
        batch=batch,
        cache_dtype=cache_dtype_name(cache_dtype) if cache_dtype is not None else None,
        compute=compute,
        reserve=reserve,
        plans=plans,
        config_heads=_config_heads(docs) if docs.graph.derived_from_code else None,
    )
    with doing("planning the deployment"):
        planned = plan_deployment(docs.graph, docs.family, request)
    if as_json:
        sys.stdout.write(json_text(plan_json(model, planned)))
        return
    _stdout().print(render_plan(model, planned))


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


ReadTrustOption = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="With --from-code, import and run the model folder's own modeling code (its config's auto_map).",
    ),
]


def _trusted(from_code: bool, trust_remote_code: bool) -> bool:
    """--trust-remote-code, refused without --from-code: these commands would run nothing with it."""
    if trust_remote_code and not from_code:
        raise InputError(
            "--trust-remote-code runs the model's own code only to read the graph off it: pass --from-code too",
            path="--trust-remote-code",
        )
    return trust_remote_code


def _checkpoint_location(docs: ModelDocs, checkpoint: str | None) -> str | None:
    """--checkpoint, else the Hub repo's (HF cache first), else the model folder's own safetensors."""
    from archviz.verify.check import checkpoint_location

    return checkpoint_location(docs, checkpoint)


AGREE, DISAGREE, BAD_INPUT, UNVERIFIED, INTERNAL_ERROR = 0, 1, 2, 3, 4
"""``archviz check``'s exit codes (``--allow-unverified`` turns ``UNVERIFIED`` into 0). A partial verdict (everything
agrees, but the graph leaves parts of the config out) exits ``UNVERIFIED`` too: the whole model was not verified."""


@app.command()
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
    from archviz.pipeline import describe_model
    from archviz.present.json_documents import verification_json
    from archviz.present.jsontext import json_text
    from archviz.present.report import render_verification
    from archviz.verify.check import verify
    from archviz.verify.checkpoint import read_checkpoint
    from archviz.verify.costcheck import witness_context

    witness_context(context, path="--context")
    with doing("describing the model"):
        docs = describe_model(
            model,
            revision=revision,
            assumptions=_assumptions(assume),
            partial=partial,
            source=_source(source),
            from_code=from_code,
            trust_remote_code=from_code and trust_remote_code,
        )
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


@app.command()
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
    from archviz.verify.check import predicted_checkpoint
    from archviz.verify.checkpoint import read_checkpoint, write_manifest

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


@app.command()
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


@app.command()
def card(
    model: ModelArgument,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown for the Hub's README.md (the only format so far: the default).")
    ] = False,
    revision: RevisionOption = None,
    assume: AssumeOption = None,
    partial: PartialOption = False,
    source: SourceOption = "auto",
) -> None:
    """Print an "Architecture" section for MODEL's model card: figures, layer map, cost, a Mermaid diagram, sources.

    Every number is the one `inspect --json` gives.
    """
    from archviz.pipeline import describe_model
    from archviz.present.card import model_card

    del markdown  # Markdown is the only format; the flag names it, as the README's command line does

    docs = describe_model(
        model, revision=revision, assumptions=_assumptions(assume), partial=partial, source=_source(source)
    )
    sys.stdout.write(model_card(docs))


@app.command()
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


def _config_heads(docs: ModelDocs) -> tuple[int, int] | None:
    """The attention and KV heads the config sets (transformers' names), for a graph read off the code."""
    settings = docs.config.settings
    heads, kv = settings.get("num_attention_heads"), settings.get("num_key_value_heads")
    if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
        return None
    return heads, kv if isinstance(kv, int) and not isinstance(kv, bool) and kv >= 1 else heads


def _pair(item: str) -> tuple[str, str]:
    """``A:B`` as the pair (A, B)."""
    a, sep, b = item.partition(":")
    if not sep or not a or not b:
        raise InputError("expected A:B, two of the rendered models", path=f"--compare {item}")
    return a, b


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
) -> None:
    """Build the static documentation site for MODELs into OUT (written whole, then moved into place).

    Progress goes to standard error when it is a terminal. Two renders into one OUT take turns.
    """
    from archviz.inputs.resolve import BUNDLED
    from archviz.present.terminal import SafeConsole
    from archviz.site.batch import RenderRequest, default_jobs, render_site
    from archviz.site.progress import PlainReporter, RichReporter

    console = SafeConsole(stderr=True, highlight=False, emoji=False)
    try:
        names = tuple(models or sorted(BUNDLED))
        request = RenderRequest(
            names=names,
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


def _app_for(arguments: list[str]) -> typer.Typer:
    """The app with only the command ``arguments`` ask for, when they name one: typer turns every registered command
    into a click command before parsing (a sixth of ``inspect --json``'s time), and the others are not run. The group's
    own options are flags, so the first argument not starting with ``-`` is the command; any other line (no command,
    an unknown one, ``--help``) gets the whole app, with its list and suggestions."""
    asked = next((argument for argument in arguments if not argument.startswith("-")), None)
    chosen = [info for info in app.registered_commands if asked is not None and _command_name(info) == asked]
    if len(chosen) != 1:
        return app
    narrowed = copy.copy(app)
    narrowed.registered_commands = chosen
    return narrowed


def _command_name(info: typer.models.CommandInfo) -> str | None:
    """A registered command's name as typer gives it (the function's, ``_`` as ``-``, unless named)."""
    if info.name:
        return info.name
    return typer.main.get_command_name(info.callback.__name__) if info.callback is not None else None


def main() -> None:
    """Console-script entry point: a usage error (an option out of range, an unknown option) is one line on stderr
    and exit code 2, like every other bad input."""
    collect_less()
    try:
        code = _app_for(sys.argv[1:])(standalone_mode=False)
    except typer.Abort:
        sys.exit(1)
    except TyperException as error:  # typer's own click: UsageError, BadParameter, NoSuchOption, NoArgsIsHelpError
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `archviz`: the help, as typer shows it
            error.show()  # type: ignore[attr-defined]
        else:
            from archviz.present.terminal import SafeConsole

            context = getattr(error, "ctx", None)
            # The command's name where a command's option is at fault, once: ``archviz: error: check: …``.
            where = f"{context.info_name}: " if context is not None and context.parent is not None else ""
            message = error.format_message() if hasattr(error, "format_message") else str(error)
            SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False).print(
                printable(f"archviz: error: {where}{message}"), markup=False
            )
        sys.exit(getattr(error, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
