"""The command line, through typer's CliRunner and once as a real subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import _app_for, app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def test_inspect_json_k2_golden(golden: Callable[[str, str], None]) -> None:
    result = runner.invoke(app, ["inspect", "kimi-k2-instruct", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["model"] == {
        "name": "kimi-k2-instruct",
        "model_type": "kimi_k2",
        "family": "deepseek_v3",
        "transformers_model_type": "deepseek_v3",
        "architecture": "DeepseekV3ForCausalLM",
        "repo": "moonshotai/Kimi-K2-Instruct",
        "revision": "fd1984e2b7a3",
        "checkpoint_dtype": "BF16",
    }
    totals = document["totals"]
    assert totals["parameters"] == 1_026_408_209_408 and totals["buffers"] == 23_040
    assert sum(n["parameters_per_instance"] * n["instances"] for n in document["nodes"]) == totals["parameters"]
    embedding = next(n for n in document["nodes"] if n["id"] == "token-embedding")
    assert embedding["parameters_per_instance"] == 1_174_405_120 and embedding["instances"] == 1
    assert embedding["calculation"][0]["formula"] == "vocab_size × hidden_size"
    assert embedding["calculation"][0]["arithmetic"] == "163,840 × 7,168"
    state = next(n for n in document["nodes"] if n["id"] == "embedded-state")
    assert state["outputs"] == ["[B batch, T positions, 7168 d]"]
    assert state["decode"]["outputs"] == ["[B batch, 1 positions, 7168 d]"]
    expert = next(n for n in document["nodes"] if n["id"] == "moe.routed-expert")
    assert (expert["parameters_per_instance"], expert["instances"]) == (44_040_192, 23_040)
    assert expert["placement"]["where"] == "layers 1–60 × 384 experts"
    assert {g["id"] for g in document["groups"]} >= {"model", "block", "attention", "mlp", "moe", "moe.experts"}
    golden("kimi-k2-instruct.inspect.json", result.stdout)


def test_the_console_script_builds_only_the_command_asked_for() -> None:
    """``main`` gives typer the asked command alone; any other line gets the whole app (its list, its suggestions)."""
    assert [info.callback.__name__ for info in _app_for(["--debug", "inspect", "check"]).registered_commands] == [
        "inspect"
    ]
    for line in ([], ["--help"], ["--version"], ["inspekt", "x"]):
        assert _app_for(line) is app, line
    assert len(app.registered_commands) > 5  # the narrowed copy left the app whole
    result = subprocess.run(
        [sys.executable, "-m", "archviz.cli", "inspekt", "kimi-k2-instruct"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "Did you mean 'inspect'?" in result.stderr


def test_version_names_archviz_transformers_and_torch() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    expected = (
        f"archviz {version('archviz')} (transformers {version('transformers').partition('+')[0]}, "
        f"torch {version('torch').partition('+')[0]})"
    )
    assert result.stdout == expected + "\n"


def test_version_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from archviz.cli import main\n"
        "sys.argv = ['archviz', '--version']\n"
        "try:\n    main()\n"
        "except SystemExit as exit:\n    print(exit.code, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.stdout.splitlines()[-1] == "0 False False", run.stderr
    assert run.stdout.startswith("archviz ")


def test_inspect_json_imports_neither_pydantic_nor_rich_nor_torch() -> None:
    """The command line's start (issue 20): ``inspect --json`` pays for none of pydantic (typer's option coercion),
    rich (the consoles), torch or transformers."""
    code = (
        "import runpy, sys\n"
        "sys.argv = ['archviz', 'inspect', 'kimi-k2-instruct', '--json']\n"
        "try:\n    runpy.run_module('archviz', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = ('pydantic', 'rich', 'torch', 'transformers')\n"
        "sys.stderr.write(repr(sorted(name for name in sys.modules if name.partition('.')[0] in heavy)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["model"]["name"] == "kimi-k2-instruct"
    assert run.stderr == "[]"


def test_plain_coercion_is_typers() -> None:
    """Every option the command line coerces without pydantic gets the value typer's own coercion gives."""
    import typer.main
    from typer._click import Context
    from typer._coercion import build_runtime_param

    from archviz.cli.app import _coerce_plainly, _PlainParam

    group = typer.main.get_command(app)
    samples = {str: ["kimi-k2-instruct", "", "--x", "7"], bool: [True, False], list[str]: [(), ("a=1", "b=[2]")]}
    checked = 0
    for command in [group, *group.commands.values()]:  # type: ignore[attr-defined]
        context = Context(command)
        for param in command.get_params(context):
            param._runtime_param = None
            _coerce_plainly(param)
            if not isinstance(param._runtime_param, _PlainParam):
                continue
            for value in samples[param.type_descriptor.annotation]:
                typers = build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=context)
                assert param._runtime_param.coerce(value, param=param, ctx=context) == typers
                checked += 1
    assert checked > 20


def test_inspect_tree_shows_folded_repeats() -> None:
    result = runner.invoke(app, ["inspect", "kimi-k2-instruct"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "Routed experts layers 1–60 × 384 experts" in result.stdout
    assert "44,040,192 params × 23,040" in result.stdout
    assert "1,026,408,209,408" in result.stdout


def test_inspect_decode_shapes() -> None:
    result = runner.invoke(app, ["inspect", "kimi-k2-instruct", "--decode"], env={"COLUMNS": "160"})
    assert "[B batch, 1 positions, 7168 d]" in result.stdout
    assert "T positions" not in result.stdout


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{\n  "hidden_size": 7168,\n}', "config.json:3:1: invalid JSON: Expecting property name"),
        ("[1]", "config.json:1: the config must be a JSON object, not a list"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(write_config: Callable[..., Path], text: str, expected: str) -> None:
    folder = write_config(text=text)
    result = runner.invoke(app, ["inspect", str(folder)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and lines[0].startswith("archviz: error: ")
    assert "Traceback" not in result.output


def test_unknown_model_name() -> None:
    result = runner.invoke(app, ["inspect", "no-such-model"])
    assert result.exit_code == 2
    assert "not a bundled model (kimi-k2-instruct, kimi-k2.5, kimi-k3, kimi-linear-48b-a3b-instruct)" in result.stderr


def test_config_path_and_folder_are_the_same(write_config: Callable[..., Path]) -> None:
    folder = write_config()
    by_folder = runner.invoke(app, ["inspect", str(folder), "--json"])
    by_file = runner.invoke(app, ["inspect", str(folder / "config.json"), "--json"])
    assert json.loads(by_folder.stdout)["totals"] == json.loads(by_file.stdout)["totals"]


@pytest.mark.slow
def test_console_script_subprocess(write_config: Callable[..., Path]) -> None:
    executable = shutil.which("archviz") or str(Path(sys.executable).parent / "archviz")
    ok = subprocess.run([executable, "inspect", "kimi-k2-instruct", "--json"], capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["totals"]["parameters"] == 1_026_408_209_408
    folder = write_config({"hidden_size": 0})
    bad = subprocess.run([executable, "inspect", str(folder)], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "hidden_size: expected a positive integer, got 0" in bad.stderr
    assert f"{folder / 'config.json'}:" in bad.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["cost", "kimi-k2-instruct", "--prompt", "0"], "cost: Invalid value for '--prompt'"),
        (["check", "kimi-k2-instruct", "--no-such-option"], "check: No such option: --no-such-option"),
        (["inspect"], "inspect: Missing argument 'MODEL'."),
        (["--no-such-option"], "No such option: --no-such-option"),  # once: not "archviz: error: archviz: …"
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(args: list[str], said: str) -> None:
    executable = shutil.which("archviz") or str(Path(sys.executable).parent / "archviz")
    result = subprocess.run([executable, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"archviz: error: {said}"), result.stderr


def test_the_command_lines_conventions() -> None:
    """-h beside --help (on every command), -V beside --version, no value shown after a flag, typer's completion."""
    assert runner.invoke(app, ["-h"]).exit_code == 0
    assert "Usage: archviz check" in runner.invoke(app, ["check", "-h"]).stdout
    version = runner.invoke(app, ["-V"])
    assert version.exit_code == 0 and version.stdout.startswith("archviz ")
    for command in ([], ["check"], ["render"], ["inspect"]):
        shown = runner.invoke(app, [*command, "--help"]).stdout
        assert "Usage: archviz" in shown and "--help" in shown and "<bool>" not in shown, shown
    assert "--show-completion" in runner.invoke(app, ["--help"]).stdout


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["archviz"], id="console-script"),
        pytest.param([sys.executable, "-m", "archviz"], id="python-m-archviz"),
        pytest.param([sys.executable, "cli.py"], id="checkout-shim"),
    ],
)
def test_every_way_to_run_the_command_line(command: list[str]) -> None:
    if command == ["archviz"]:
        command = [shutil.which("archviz") or str(Path(sys.executable).parent / "archviz")]
    result = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
    assert all(name in result.stdout for name in ("inspect", "check", "manifest", "render"))


@pytest.mark.slow
def test_wheel_installs_the_package_only(tmp_path: Path) -> None:
    # The command line is archviz.cli: the checkout's cli.py shim must not become a top-level `cli` module
    # in site-packages, where it would shadow (or be shadowed by) any other distribution's.
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--quiet", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("archviz-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    top_level = {name.split("/", 1)[0] for name in names}
    assert {entry for entry in top_level if not entry.endswith(".dist-info")} == {"archviz"}
    assert "cli.py" not in names and not any(name.startswith("cli/") for name in names)
    assert {"archviz/cli/__init__.py", "archviz/cli/app.py", "archviz/__main__.py"} <= set(names)
    assert {"archviz/templates/card.html", "archviz/templates/assets/archviz.css"} <= set(names)
    assert {f"archviz/schemas/{name}.json" for name in ("inspect", "check", "cost", "diff", "plan")} <= set(names)
    assert "archviz/cost/gpus.toml" in names  # the GPU table `archviz plan` reads
    assert "archviz = archviz.cli:main" in entry_points


def test_an_error_at_line_100_is_not_an_emoji(write_config: Callable[..., Path]) -> None:
    """Regression: the console read ``config.json:100:`` as the emoji code ``:100:``."""
    folder = write_config({"hidden_size": 0})
    path = folder / "config.json"
    original = path.read_text()
    at = next(n for n, row in enumerate(original.splitlines(), 1) if '"hidden_size"' in row)
    text = original.replace('"hidden_size"', "\n" * (100 - at) + '"hidden_size"', 1)
    path.write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if '"hidden_size"' in row)
    assert line == 100
    result = runner.invoke(app, ["inspect", str(folder)])
    assert result.exit_code == 2
    assert f"config.json:{line}: hidden_size" in result.output
