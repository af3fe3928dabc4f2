"""The ``archviz`` command line: the app of ``archviz.cli.app`` with its commands, in the order ``--help`` lists
them."""

from __future__ import annotations

import copy
import sys

import typer
from typer.exceptions import TyperException

from archviz.cli.app import app
from archviz.cli.checking import check, manifest
from archviz.cli.deploy import cost, plan
from archviz.cli.describe import card, export, inspect
from archviz.cli.site import diff, render
from archviz.common.errors import printable
from archviz.common.process import collect_less

COMMANDS = (inspect, cost, plan, check, manifest, diff, card, export, render)
"""The commands, in the order ``archviz --help`` lists them (the order they are registered in)."""
for _command in COMMANDS:
    app.command()(_command)


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
