"""Bounded on any input: one regression test per way a hostile or careless input used to hang archviz, exhaust its
memory, blame itself for the input's fault, or spoof a CI log.

Every case runs the real command line as a separate process under a memory limit (``RLIMIT_DATA``), an address-space
limit (``RLIMIT_AS``) and a time limit, so that a regression fails the test instead of hanging CI or taking the
machine down. ``python -P`` keeps the test's folder off the import path.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from archviz.site.index import SITE_ENTRIES
from tests.bounds.forked import SERVER_OF_THIS_PROCESS
from tests.bounds.test_hostile import TINY_K2 as HOSTILE_K2
from tests.families.test_families import PUBLISHED

REPO = Path(__file__).resolve().parents[2]
K25 = REPO / "tests" / "data" / "released" / "kimi-k2.5" / "config.json"
# test_hostile's tiny Kimi-K2, unquantized: a checkpoint of it is written with the safetensors library.
TINY_K2: dict[str, Any] = {key: value for key, value in HOSTILE_K2.items() if key != "quantization_config"}

MEMORY_LIMIT = 1536 * 2**20
"""Data each command may allocate (``RLIMIT_DATA``: the heap and private writable mappings): importing torch and
building a meta-device model fit well inside it."""
ADDRESS_SPACE_LIMIT = 4 * 2**30
"""Address space each command may map (``RLIMIT_AS``, ``ulimit -v``): the diagrams' WebAssembly Graphviz, which
reserves 4 GiB by default, reserves only what it uses under such a limit."""
TIME_LIMIT = 60
"""Seconds each command may take; the bounded cases end in a few."""


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str


def archviz(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, fsize: int | None = None, stdout: Any = None
) -> Run:
    """The real command line in a process of its own, with the memory, address-space and time limits: forked from a
    process that has imported torch and archviz (``tests/bounds/forked.py``), or, where ``stdout`` (a file, a
    descriptor) replaces the captured standard output or is ``"closed"``, a new ``python -P -m archviz``."""
    environment = {**os.environ, "COLUMNS": "200", **(env or {})}
    if stdout is None:
        limits = {"RLIMIT_DATA": MEMORY_LIMIT, "RLIMIT_AS": ADDRESS_SPACE_LIMIT}
        if fsize is not None:
            limits["RLIMIT_FSIZE"] = fsize
        code, out, err = SERVER_OF_THIS_PROCESS.run(
            list(args), cwd=cwd, env=environment, limits=limits, timeout=TIME_LIMIT
        )
        return Run(code=code, stdout=out, stderr=err)

    def limit() -> None:
        if stdout == "closed":
            os.close(1)
        resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    result = subprocess.run(
        [sys.executable, "-P", "-m", "archviz", *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE if stdout == "closed" else stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=TIME_LIMIT,
        preexec_fn=limit,
        check=False,
    )
    return Run(code=result.returncode, stdout=result.stdout or "", stderr=result.stderr)


def one_line_error(run: Run, *parts: str) -> None:
    """Exit 2 with one line on stderr holding every part, nothing on stdout."""
    assert run.code == 2, run
    assert run.stderr.startswith("archviz: error: ") and run.stderr.count("\n") == 1, run
    for part in parts:
        assert part in run.stderr, run


def model_folder(folder: Path, config: Mapping[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def line_of(path: Path, text: str) -> int:
    return next(number for number, row in enumerate(path.read_text().splitlines(), 1) if text in row)


def predicted_checkpoint(folder: Path, extra: Mapping[str, torch.Tensor] | None = None) -> Path:
    """``model.safetensors`` holding zeros of every tensor the graph predicts, plus ``extra``."""
    from archviz.pipeline import describe_model
    from archviz.verify.predicted import predicted_checkpoint as predict

    dtypes = {"BF16": torch.bfloat16, "F32": torch.float32}
    tensors = {
        t.name: torch.zeros(t.shape, dtype=dtypes[t.dtype]) for t in predict(describe_model(str(folder))).tensors
    }
    save_file({**tensors, **(extra or {})}, str(folder / "model.safetensors"))
    return folder / "model.safetensors"


# 1. A quantization regex used to hang every command.


def k25_with_ignored(tmp_path: Path, pattern: str) -> Path:
    config = json.loads(K25.read_text(encoding="utf-8"))
    config["text_config"]["quantization_config"]["ignore"].append(pattern)
    return model_folder(tmp_path / "model", config)


@pytest.mark.slow
def test_a_pattern_that_backtracks_in_python_re_is_matched_in_time(tmp_path: Path) -> None:
    """``re:(.|.)*X$`` took hours per module name with Python's re; the bounded matcher answers at once."""
    folder = k25_with_ignored(tmp_path, "re:(.|.)*X$")
    run = archviz("inspect", str(folder), "--json", cwd=tmp_path)
    assert run.code == 0, run
    assert json.loads(run.stdout)["totals"]["quantized_parameters"] > 0


@pytest.mark.slow
def test_a_pattern_that_backtracks_without_bound_is_refused_at_its_line(tmp_path: Path) -> None:
    folder = k25_with_ignored(tmp_path, "re:(.|.)*[0-9]{9}$")
    run = archviz("inspect", str(folder), cwd=tmp_path)
    line = line_of(folder / "config.json", '"ignore"')
    one_line_error(
        run,
        f"config.json:{line}: text_config.quantization_config.ignore: 're:(.|.)*[0-9]{{9}}$' takes too long",
    )


@pytest.mark.slow
def test_a_backtracking_modules_to_not_convert_entry_is_refused_at_its_line(tmp_path: Path) -> None:
    """transformers' quantizers (MXFP4, FBGEMM FP8) match modules_to_not_convert as regular expressions too."""
    config = json.loads((REPO / "tests" / "data" / "released" / "gpt-oss-20b" / "config.json").read_text())
    config["quantization_config"]["modules_to_not_convert"].append("(.|.)*[0-9]{9}$")
    folder = model_folder(tmp_path / "model", config)
    run = archviz("inspect", str(folder), cwd=tmp_path)
    line = line_of(folder / "config.json", '"modules_to_not_convert"')
    one_line_error(
        run, f"config.json:{line}: quantization_config.modules_to_not_convert: '(.|.)*[0-9]{{9}}$' takes too long"
    )


@pytest.mark.slow
def test_a_backtracking_gptq_dynamic_entry_is_refused_at_its_line(tmp_path: Path) -> None:
    """GPT-QModel's ``dynamic`` keys are regular expressions matched against every linear's path: the same budget."""
    config = {
        **PUBLISHED["llama-3.1-8b"],
        "quantization_config": {
            "quant_method": "gptq",
            "bits": 4,
            "group_size": 128,
            "dynamic": {"-:(.|.)*[0-9]{9}$": {}},
        },
    }
    folder = model_folder(tmp_path / "model", config)
    run = archviz("inspect", str(folder), cwd=tmp_path)
    line = line_of(folder / "config.json", '"-:(.|.)*[0-9]{9}$"')
    one_line_error(
        run, f"config.json:{line}: quantization_config.dynamic.-:(.|.)*[0-9]{{9}}$: '-:(.|.)*[0-9]{{9}}$' takes"
    )


# 2. A large expert count exhausted memory in the generic path.


@pytest.mark.slow
def test_a_million_experts_in_the_generic_path_are_refused_before_anything_is_built(tmp_path: Path) -> None:
    config = {
        "model_type": "qwen2_moe",
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
        "num_experts": 1_000_000,
        "num_experts_per_tok": 2,
    }
    folder = model_folder(tmp_path / "model", config)
    run = archviz("inspect", str(folder), cwd=tmp_path)
    line = line_of(folder / "config.json", '"num_experts"')
    one_line_error(run, f"config.json:{line}: num_experts: 1,000,000 experts in each of 2 layers are more than")


# 3. Index and manifest files had no size limit.


def test_a_huge_index_is_refused_by_its_size(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", TINY_K2)
    with (folder / "model.safetensors.index.json").open("wb") as index:
        index.truncate(4 * 2**30)  # sparse: 4 GB that take no disk
    run = archviz("check", str(folder), "--no-meta", cwd=tmp_path)
    one_line_error(run, "model.safetensors.index.json: the file is 4,294,967,296 bytes, more than the limit of")


def test_a_manifest_linking_to_an_endless_device_is_refused(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", TINY_K2)
    (tmp_path / "x.json").symlink_to("/dev/zero")
    run = archviz("check", str(folder), "--no-meta", "--checkpoint", str(tmp_path / "x.json"), cwd=tmp_path)
    one_line_error(run, "x.json: the file is a character device, not a regular file")


# 4 and 12. Deep nesting reached a RecursionError; bad --assume values were internal errors.


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("command", [["inspect"], ["render", "--no-verify", "--jobs", "1"], ["render", "--jobs", "2"]])
def test_a_config_nested_hundreds_of_levels_deep_is_refused_at_its_line(command: list[str], tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", {**TINY_K2, "deep": nested(500)})
    args = [command[0], str(folder), *command[1:]]
    if command[0] == "render":
        args += ["--out", str(tmp_path / "site")]
    run = archviz(*args, cwd=tmp_path)
    line = line_of(folder / "config.json", '"deep"') + 63  # the 64th object inside the top level
    one_line_error(run, f"config.json:{line}: the config nests objects and arrays more than 64 levels deep")
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (json.dumps(nested(600)), "--assume rope_theta: VALUE nests more than 64 levels deep"),
        ("[" * 50_000 + "]" * 50_000, "--assume rope_theta: VALUE is not JSON archviz can read"),
        ("1" * 5000, "--assume rope_theta: VALUE is not JSON archviz can read"),
    ],
    ids=["nested", "deeper-than-the-decoder", "5000-digits"],
)
def test_bad_assume_values_are_bad_input(value: str, message: str, tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", {key: v for key, v in TINY_K2.items() if key != "rope_theta"})
    one_line_error(archviz("inspect", str(folder), "--assume", f"rope_theta={value}", cwd=tmp_path), message)


# 5. Terminal escapes passed through raw: a checkpoint could clear the screen or forge a verdict line in a CI log.

FORGED = "\x1b[2J\x1b]0;owned\x07\r✓ agree\x00\u202e"


@pytest.mark.slow
def test_check_prints_no_control_sequence_of_a_tensor_name(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", {**TINY_K2, "architectures": [f"DeepseekV3ForCausalLM{FORGED}"]})
    predicted_checkpoint(folder, {f"model.stray{FORGED}.weight": torch.zeros(2, 2)})
    for args in (["check", str(folder), "--no-meta"], ["check", str(folder), "--no-meta", "--json"]):
        run = archviz(*args, cwd=tmp_path)
        assert run.code == 1, run
        for output in (run.stdout, run.stderr):
            assert not any(char in output for char in "\x1b\x07\r\x00\u202e"), output
        assert "\\x1b[2J" in run.stdout or "\\u001b[2J" in run.stdout  # said, as an escape
        if "--json" in args:
            [finding] = json.loads(run.stdout)["tensors"]
            assert finding["name"] == f"model.stray{FORGED}.weight"  # the same data, escaped only in its text


def test_diff_prints_no_control_sequence_of_a_config_key(tmp_path: Path) -> None:
    a = model_folder(tmp_path / "a", TINY_K2)
    b = model_folder(tmp_path / "b", {**TINY_K2, f"key{FORGED}": 1})
    run = archviz("diff", str(a), str(b), cwd=tmp_path)
    assert run.code == 0, run
    assert "key\\x1b[2J" in run.stdout
    assert not any(char in run.stdout for char in "\x1b\x07\r\x00\u202e"), run.stdout


# 6. An unwritable or full output folder was "a bug in archviz".


@pytest.fixture
def tiny_file_system(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (a full disk and, remounted, a read-only file system); skipped where mounting is not allowed."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_render_onto_a_full_disk_is_bad_input_and_keeps_nothing_half_written(
    tiny_file_system: Path, tmp_path: Path
) -> None:
    run = archviz("render", "kimi-k2-instruct", "--no-verify", "--out", str(tiny_file_system / "site"), cwd=tmp_path)
    one_line_error(run, "cannot write the site: No space left on device")
    assert sorted(os.listdir(tiny_file_system)) == []


@pytest.mark.slow
def test_render_onto_a_read_only_file_system_is_bad_input(tiny_file_system: Path, tmp_path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_file_system)], check=True)
    run = archviz("render", "kimi-k3", "--no-verify", "--out", str(tiny_file_system / "site"), cwd=tmp_path)
    one_line_error(run, "cannot write the site: Read-only file system")


@pytest.mark.slow
def test_render_under_a_file_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    run = archviz("render", "kimi-k3", "--no-verify", "--out", str(tmp_path / "file" / "site"), cwd=tmp_path)
    one_line_error(run, "file/site: cannot write the site: File exists")


# 13. manifest -o and --junit-xml were not written atomically.


@pytest.mark.slow
def test_a_manifest_on_a_full_disk_keeps_the_old_one(tiny_file_system: Path, tmp_path: Path) -> None:
    good = tiny_file_system / "k3.json"
    good.write_text('{"old": true}\n')
    run = archviz("manifest", "kimi-k2-instruct", "--predicted", "-o", str(good), cwd=tmp_path)
    one_line_error(run, "cannot write the manifest: No space left on device")
    assert good.read_text() == '{"old": true}\n'
    assert sorted(os.listdir(tiny_file_system)) == ["k3.json"]


def test_a_junit_report_on_a_full_disk_keeps_the_old_one(tiny_file_system: Path, tmp_path: Path) -> None:
    report = tiny_file_system / "archviz.xml"
    report.write_text("<old/>\n")
    (tiny_file_system / "filler").write_bytes(b"\0" * (60 * 1024))  # leave too little for the new report
    run = archviz("check", "kimi-k3", "--no-meta", "--junit-xml", str(report), cwd=tmp_path)
    assert run.code == 2 and "cannot write the JUnit report: No space left on device" in run.stderr, run
    assert report.read_text() == "<old/>\n"


# 7. The config size cap did not bound render: the overview embedded the whole highlighted config.


@pytest.mark.slow
def test_a_config_of_400000_lines_gives_a_page_of_bounded_size(tmp_path: Path) -> None:
    config = {**TINY_K2, "padding": list(range(400_000))}
    folder = model_folder(tmp_path / "model", config)
    run = archviz("render", str(folder), "--no-verify", "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert run.code == 0, run
    page = tmp_path / "site" / "model" / "index.html"
    assert page.stat().st_size < 2 * 2**20
    assert "only the lines that set values the graph uses are shown" in page.read_text()


# 8. Model folder names collided with the site's own files.


CASE_VARIANTS = ("INDEX.HTML", "Search-Index.js")
"""Site files' names in another case: the same folder on a case-insensitive file system."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "names",
    [sorted(SITE_ENTRIES - {".archviz-site"}), list(CASE_VARIANTS)],
    ids=["site-files", "case-variants"],
)
def test_models_named_as_site_files_get_folders_of_their_own(names: list[str], tmp_path: Path) -> None:
    """One render of Kimi-K2 beside a model named as each file the site writes (with a compare page of K2 and the
    model named ``compare``): every model gets a folder of its own, and beside them the render writes exactly the
    site's entries."""
    k2 = model_folder(tmp_path / "models" / "kimi-k2", TINY_K2)
    named = [
        model_folder(tmp_path / "models" / name, {**TINY_K2, "hidden_size": 64 * (i + 2)})
        for i, name in enumerate(names)
    ]
    out = tmp_path / "site"
    pairs = ["--compare", "kimi-k2:model-compare"] if "compare" in names else []
    run = archviz("render", str(k2), *map(str, named), *pairs, "--no-verify", "--out", str(out), cwd=tmp_path)
    assert run.code == 0, run
    assert (out / "index.html").read_text().startswith("<!DOCTYPE html>")
    assert "window.ARCHVIZ_SEARCH_INDEX = " in (out / "search-index.js").read_text()
    assert (out / "assets" / "archviz.css").is_file()
    folders = {"kimi-k2", *(f"model-{name.lower()}" for name in names)}
    for folder in folders:
        assert (out / folder / "index.html").is_file(), folder
    if "compare" in names:
        assert {path.name for path in out.iterdir()} - folders == SITE_ENTRIES
        assert (out / "compare" / "kimi-k2" / "model-compare.html").is_file()


@pytest.mark.slow
def test_models_named_compare_nodes_and_logits_leave_the_compare_page_alone(tmp_path: Path) -> None:
    """The compare page of `nodes` and `logits` is compare/nodes/logits.html, which a model named `compare` would
    have overwritten with its Logits card."""
    folders = [
        model_folder(tmp_path / "models" / name, {**TINY_K2, "hidden_size": 64 * (i + 1)})
        for i, name in enumerate(["compare", "nodes", "logits"])
    ]
    out = tmp_path / "site"
    run = archviz("render", *map(str, folders), "--no-verify", "--out", str(out), cwd=tmp_path)
    assert run.code == 0, run
    compare_page = (out / "compare" / "nodes" / "logits.html").read_text()
    assert "compare.css" in compare_page and '<th scope="col">A: ' in compare_page
    assert (out / "model-compare" / "nodes" / "logits.html").is_file()


# 9. Checkpoint symlinks were followed out of the model folder.


@pytest.mark.parametrize("target", ["/etc/passwd", "elsewhere"])
def test_a_checkpoint_link_out_of_the_model_folder_is_refused(target: str, tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", TINY_K2)
    if target == "elsewhere":  # another model's real checkpoint
        other = model_folder(tmp_path / "other", TINY_K2)
        target = str(predicted_checkpoint(other))
    (folder / "model.safetensors").symlink_to(target)
    run = archviz("check", str(folder), "--no-meta", cwd=tmp_path)
    one_line_error(run, "model.safetensors: the safetensors file is a link to a file outside model")
    assert "root:" not in run.stderr and "header length" not in run.stderr


def test_a_checkpoint_link_inside_the_model_folder_is_read(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", TINY_K2)
    (folder / "weights").mkdir()
    real = predicted_checkpoint(folder)
    real.rename(folder / "weights" / "model.safetensors")
    (folder / "model.safetensors").symlink_to(Path("weights") / "model.safetensors")
    assert archviz("check", str(folder), "--no-meta", cwd=tmp_path).code == 0


# 10. Any empty tensor was excused as "the config sizes a part to zero".


def test_an_empty_tensor_the_config_does_not_size_to_zero_is_unexpected(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", TINY_K2)
    predicted_checkpoint(folder, {"model.layers.0.mlp.anything.weight": torch.zeros(0, 64, dtype=torch.bfloat16)})
    run = archviz("check", str(folder), "--no-meta", "--json", cwd=tmp_path)
    assert run.code == 1, run
    assert [t["name"] for t in json.loads(run.stdout)["tensors"]] == ["model.layers.0.mlp.anything.weight"]


# 11. A kill between the two renames of the site swap left no site.

SWAP = """
import os, signal, sys
from pathlib import Path
from archviz.pipeline import describe_model
from archviz.site import publish

exchange = publish._exchange
def killed_after(a, b):
    done = exchange(a, b)
    os.kill(os.getpid(), signal.SIGKILL)
publish._exchange = killed_after
publish.write_site([describe_model("kimi-k3")], Path(sys.argv[1]))
"""


@pytest.mark.slow
def test_a_render_killed_at_the_swap_leaves_a_whole_site(tmp_path: Path) -> None:
    """The swap is one exchange of the two folders: killed right after it, the new site is in place, and the old one
    sits in the staging folder for the next render to delete (the two-rename fallback is held by test_hostile)."""
    out = tmp_path / "site"
    assert archviz("render", "kimi-k2-instruct", "--no-verify", "--out", str(out), cwd=tmp_path).code == 0
    killed = subprocess.run([sys.executable, "-P", "-c", SWAP, str(out)], cwd=tmp_path, timeout=TIME_LIMIT)
    assert killed.returncode == -signal.SIGKILL
    assert (out / "kimi-k3" / "index.html").is_file() and not (out / "kimi-k2-instruct").exists()
    assert archviz("render", "kimi-k3", "--no-verify", "--out", str(out), cwd=tmp_path).code == 0
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".site")) == []


# 14. A FIFO given as --checkpoint hung forever.


@pytest.mark.parametrize("name", ["x.safetensors", "x.json"])
def test_a_fifo_as_the_checkpoint_is_refused_at_once(name: str, tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "model", TINY_K2)
    os.mkfifo(tmp_path / name)
    run = archviz("check", str(folder), "--no-meta", "--checkpoint", str(tmp_path / name), cwd=tmp_path)
    one_line_error(run, f"{name}: the ", "is a FIFO, not a regular file")


def test_a_fifo_as_the_config_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.json")
    one_line_error(archviz("inspect", str(tmp_path / "config.json"), cwd=tmp_path), "config.json: ")


# 15. `python -m archviz` inside a model folder imported that folder's archviz.py.


def test_python_dash_p_does_not_import_a_planted_archviz_module(tmp_path: Path) -> None:
    (tmp_path / "archviz.py").write_text("import pathlib; pathlib.Path('PLANTED').write_text('ran')\n")
    run = archviz("--help", cwd=tmp_path)
    assert run.code == 0 and "Usage" in run.stdout
    assert not (tmp_path / "PLANTED").exists()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "python -P -m archviz" in readme


# 16. Broken remote code under --trust-remote-code was blamed on archviz.

REMOTE_CONFIG = "from transformers import DeepseekV3Config\n\n\nclass BrokenConfig(DeepseekV3Config):\n    pass\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("modeling", "message"),
    [
        (
            "class BrokenForCausalLM:\n    pass\n",
            "which is the class BrokenForCausalLM, not a subclass of transformers'",
        ),
        ("BrokenForCausalLM = 42\n", "which is an object of type int, not a subclass of transformers'"),
        ("1 / 0\n", "cannot import modeling_broken.BrokenForCausalLM from the model's own code"),
        (
            "from transformers import DeepseekV3ForCausalLM\n\n\nclass BrokenForCausalLM(DeepseekV3ForCausalLM):\n"
            "    def __init__(self, config):\n        super().__init__(config)\n        config.no_such_attribute\n",
            "the model's own code cannot build BrokenForCausalLM from this config: AttributeError",
        ),
        # A model's code that exits 0 on import must not pass a CI gate silently.
        ("import sys\n\nsys.exit(0)\n", "cannot import modeling_broken.BrokenForCausalLM from the model's own code"),
    ],
    ids=["not-a-model", "not-a-class", "raises-on-import", "raises-in-init", "exits-on-import"],
)
def test_broken_remote_code_is_the_models_fault(modeling: str, message: str, tmp_path: Path) -> None:
    auto_map = {
        "AutoConfig": "configuration_broken.BrokenConfig",
        "AutoModelForCausalLM": "modeling_broken.BrokenForCausalLM",
    }
    folder = model_folder(tmp_path / "model", {**TINY_K2, "auto_map": auto_map})
    (folder / "configuration_broken.py").write_text(REMOTE_CONFIG)
    (folder / "modeling_broken.py").write_text(modeling)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    run = archviz("check", str(folder), "--trust-remote-code", cwd=tmp_path, env=env)
    one_line_error(run, message)


# The fuzz test: configs, headers, indexes and manifests, one process under a 1 GiB memory limit.

FUZZ_MEMORY_LIMIT = 2**30


@pytest.mark.slow
def test_fuzzed_inputs_end_in_a_known_exit_code_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """``tests/bounds/fuzz_bounded.py``: every case exits 0-3 (2 with one line), each within 10 s (hypothesis'
    deadline), all of them within 1 GiB of data."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (FUZZ_MEMORY_LIMIT, FUZZ_MEMORY_LIMIT))

    result = subprocess.run(
        [sys.executable, "-P", str(Path(__file__).with_name("fuzz_bounded.py")), "150"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # 150 examples took 51 s on a loaded 2-core machine; 120 s leaves room, and no hang passes
        preexec_fn=limit,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
