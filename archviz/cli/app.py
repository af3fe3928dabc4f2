"""The ``archviz`` app: its error handling, the options several commands share, and what every command does
with bad input, standard output and an internal error."""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click import Command, Context  # the context TyperGroup's methods take (typer vendors click)
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import TyperGroup, _TyperParameter
from typer.exceptions import TyperException

from archviz.common.errors import InputError, printable, step_of
from archviz.graph.nodes import Assumption
from archviz.inputs.config import MAX_CONFIG_DEPTH, nesting_depth

if TYPE_CHECKING:  # the pipeline and rich are imported by the commands that use them, not by `archviz --help`
    from archviz.pipeline import ModelDocs
    from archviz.present.terminal import SafeConsole

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
            end = args.index("--") if "--" in args else len(args)
        if "--no-cache" in args[:end]:
            from archviz.inputs.cache import NO_CACHE_ENV

            os.environ[NO_CACHE_ENV] = "1"  # this process and the workers it starts (render --jobs)
            args = [arg for arg in args[:end] if arg != "--no-cache"] + args[end:]
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
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Neither read nor write the description cache of models read off transformers' code "
            "($ARCHVIZ_CACHE, else ~/.cache/archviz).",
        ),
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
    from archviz.provenance.modeling_file import PREFERENCES

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


@dataclass(frozen=True)
class Reading:
    """How a command reads MODEL: the reading options it took."""

    revision: str | None
    assume: list[str] | None
    partial: bool
    from_code: bool
    trust_remote_code: bool


def _describe(model: str, reading: Reading, *, source: str = "auto") -> ModelDocs:
    """MODEL described with the reading options its command took (--trust-remote-code refused without --from-code,
    ``_trusted``)."""
    from archviz.pipeline import describe_model

    return describe_model(
        model,
        revision=reading.revision,
        assumptions=_assumptions(reading.assume),
        partial=reading.partial,
        source=_source(source),
        from_code=reading.from_code,
        trust_remote_code=_trusted(reading.from_code, reading.trust_remote_code),
    )


def _checkpoint_location(docs: ModelDocs, checkpoint: str | None) -> str | None:
    """--checkpoint, else the Hub repo's (HF cache first), else the model folder's own safetensors."""
    from archviz.verify.predicted import checkpoint_location

    return checkpoint_location(docs, checkpoint)


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
