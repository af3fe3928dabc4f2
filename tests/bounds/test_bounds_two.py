"""Bounded on any input, round two: each case a way an input used to hang archviz, exhaust its memory or address
space, or end in an internal error, run through the real command line in its own process under test_bounds' limits
(``RLIMIT_DATA``, ``RLIMIT_AS`` of 4 GiB, and a time limit)."""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bounds.test_bounds import ADDRESS_SPACE_LIMIT, MEMORY_LIMIT, TIME_LIMIT, TINY_K2, archviz, one_line_error

# Each case starts archviz in a process of its own (a second or more): all of them run in the whole suite, not the
# everyday run (pytest -m "not slow and not browser"), as test_bounds' cases do by tests/slow_cases.txt.
pytestmark = pytest.mark.slow

# 1. Huge integers in a checkpoint header or manifest were multiplied before they were checked.

HUGE = "9" * 4300
"""The largest integer Python's JSON decoder reads by default (4,300 digits)."""


def safetensors_with_shape(path: Path, shape_json: str) -> Path:
    """A safetensors file of one F32 tensor whose header's shape is the JSON text given, with 4 data bytes."""
    header = ('{"w":{"dtype":"F32","shape":' + shape_json + ',"data_offsets":[0,4]}}').encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    return path


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ("[" + ",".join([HUGE] * 1000) + "]", "'shape' has 1,000 dimensions, more than 64"),
        ("[" + ",".join([HUGE] * 3) + "]", "'shape' holds a dimension of 4300 digits"),
        ("[" + ",".join(["2"] * 5_000_000) + "]", "'shape' has 5,000,000 dimensions, more than 64"),
        ("[" + ",".join(["4294967296"] * 60) + "]", "'shape' has more elements than a checkpoint can hold"),
    ],
    ids=["1000-huge-dims", "3-huge-dims", "5-million-dims", "product-past-2**64"],
)
def test_huge_header_dimensions_are_refused_before_any_arithmetic(shape: str, message: str, tmp_path: Path) -> None:
    file = safetensors_with_shape(tmp_path / "x.safetensors", shape)
    run = archviz("manifest", "kimi-k2-instruct", "--checkpoint", str(file), "-o", "-", cwd=tmp_path)
    one_line_error(run, "x.safetensors: tensor 'w': ", message)


def test_huge_manifest_dimensions_are_refused(tmp_path: Path) -> None:
    manifest = {
        "format": "archviz-manifest",
        "version": 1,
        "source": "x",
        "revision": None,
        "metadata": {},
        "tensors": [{"name": "w", "dtype": "F32", "shape": [int(HUGE)] * 300}],
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    run = archviz("check", "kimi-k2-instruct", "--no-meta", "--checkpoint", str(path), cwd=tmp_path)
    one_line_error(run, "m.json: tensors[0] ('w'): 'shape' has 300 dimensions, more than 64")


# 8. Under an address-space limit the WebAssembly Graphviz failed to reserve its 4 GiB.


def test_export_svg_runs_under_an_address_space_limit(tmp_path: Path) -> None:
    run = archviz("export", "kimi-k2-instruct", "--format", "svg", "-o", str(tmp_path / "k2.svg"), cwd=tmp_path)
    assert run.code == 0, run
    assert "<svg" in (tmp_path / "k2.svg").read_text(encoding="utf-8")


# 2, 5 and 11. plan's and cost's options had no upper bound, and GPU figures none at all.

DIGITS = "9" * 4300


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "--gpu", "h200", "--dp", "100000000"], "'--dp': Input should be less than or equal to 1048576"),
        (
            ["plan", "--gpu", "h200", "--dp", "1000000"],
            "a stage's 1,000,000 ranks (tp × dp), 1,463,000,000 local shapes, more than archviz adds up",
        ),
        (
            ["plan", "--gpu", "h200", "--tp", "100000", "--convention", "transformers"],
            "a stage's 100,000 ranks (tp × dp), 146,300,000 local shapes, more than archviz adds up",
        ),
        (["plan", "--gpu", "h200", "--pp", "10000"], "more pipeline stages than the model's 61 layers"),
        (["cost", "--prompt", DIGITS], "'--prompt': Input should be less than or equal to 4294967296"),
        (["cost", "--context", DIGITS], "'--context': Input should be less than or equal to 4294967296"),
        (["plan", "--gpu", "h200", "--batch", DIGITS], "'--batch': Input should be less than or equal to 1048576"),
        (["plan", "--gpu", "h200", "--gpu-memory", "0"], "--gpu-memory 0: must be a number from 0.001 to 65,536"),
        (["plan", "--gpu", "h200", "--gpu-memory", "-80"], "--gpu-memory -80: must be a number from 0.001 to 65,536"),
        (["plan", "--gpu", "h200", "--gpu-memory", "inf"], "--gpu-memory inf: must be a number"),
        (["plan", "--gpu", "h200", "--gpu-memory", "nan"], "--gpu-memory nan: must be a number"),
        (["plan", "--gpu", "h200", "--gpu-memory", "1e308"], "--gpu-memory 1e+308: must be a number"),
        (["plan", "--gpu", "h200", "--bandwidth", "0"], "--bandwidth 0: must be a number from 0.001 to 1,000"),
        (["plan", "--gpu", "h200", "--bandwidth", "nan"], "--bandwidth nan: must be a number"),
        (["plan", "--gpu", "h200", "--bandwidth", "-1"], "--bandwidth -1: must be a number"),
        (["plan", "--gpu", "h200", "--bf16", "0"], "--bf16 0: must be a number from 0.001 to 1,000,000"),
        (["plan", "--gpu", "h200", "--bf16", "inf"], "--bf16 inf: must be a number"),
    ],
    ids=lambda value: " ".join(value)[:40] if isinstance(value, list) else None,
)
def test_plan_and_cost_options_are_bounded(args: list[str], message: str, tmp_path: Path) -> None:
    run = archviz(args[0], "kimi-k2-instruct", *args[1:], cwd=tmp_path)
    one_line_error(run, message)
    assert len(run.stderr) < 400, run  # a number of 4,300 digits is not repeated whole


def test_the_stages_a_10000_layer_model_needs_are_found_in_seconds(tmp_path: Path) -> None:
    """Each stage count tried was a pass over every tensor group: O(L²) for a 10,000-layer model, minutes."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 10_000,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
        "head_dim": 128,
    }
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    started = time.monotonic()
    run = archviz("plan", str(folder), "--gpu", "h200", "--engine", "none", cwd=tmp_path)  # the flat 10 % reserve
    one_line_error(run, "needs at least 127 GPUs of this kind", "with tp 1 and dp 1, pp 147 (147 GPUs) fits")
    assert time.monotonic() - started < 30, run


# 7. A LLaVA config with a 10,000-layer vision tower took 54-84 s and over 1 GiB to read off the code.


def test_the_layers_read_off_the_code_are_bounded_in_all_parts_together(tmp_path: Path) -> None:
    """Every part's layer count counts (the vision tower's too), refused at the largest one's line before anything is
    built: seconds, not a minute."""
    config = {
        "model_type": "llava",
        "architectures": ["LlavaForConditionalGeneration"],
        "text_config": {"model_type": "llama", "num_hidden_layers": 2},
        "vision_config": {
            "model_type": "clip_vision_model",
            "num_hidden_layers": 10_000,
            "hidden_size": 64,
            "intermediate_size": 64,
            "num_attention_heads": 2,
        },
    }
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    started = time.monotonic()
    run = archviz("inspect", str(folder), cwd=tmp_path)
    one_line_error(run, "config.json:12: vision_config.num_hidden_layers: 10,000 layers", "(2,048)")
    assert time.monotonic() - started < 30, run


# 5 (and issue 42). A custom GPU given the flags the error asks for crashed on an FP8 checkpoint (ZeroDivisionError,
# exit 4): its FP8 throughput was a zero, not unknown.


def test_a_custom_gpu_without_an_fp8_figure_asks_for_it(tmp_path: Path) -> None:
    custom = ("--gpu-memory", "141", "--bandwidth", "4.8", "--bf16", "989", "--gpus", "16")
    run = archviz("plan", "kimi-k2-instruct", *custom, cwd=tmp_path)
    one_line_error(run, "--compute fp8: your GPU has no dense fp8 throughput: give it with --fp8")
    assert archviz("plan", "kimi-k2-instruct", *custom, "--fp8", "1979", cwd=tmp_path).code == 0
    assert archviz("plan", "kimi-k2-instruct", *custom, "--compute", "bf16", cwd=tmp_path).code == 0


# 4. A full or closed standard output was an internal error.

PRINTING = [
    ["inspect", "kimi-k2-instruct", "--json"],
    ["card", "kimi-k2-instruct"],
    ["cost", "kimi-k2-instruct"],
    ["check", "kimi-k2-instruct", "--no-meta"],
    ["export", "kimi-k2-instruct", "--format", "json"],
    ["manifest", "kimi-k2-instruct", "--predicted", "-o", "-"],
]


@pytest.mark.parametrize("args", PRINTING, ids=lambda args: args[0])
def test_a_full_standard_output_is_bad_input(args: list[str], tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        run = archviz(*args, cwd=tmp_path, stdout=full)
    one_line_error(run, "standard output: cannot write: No space left on device")


@pytest.mark.parametrize("args", PRINTING, ids=lambda args: args[0])
def test_a_closed_standard_output_is_bad_input(args: list[str], tmp_path: Path) -> None:
    run = archviz(*args, cwd=tmp_path, stdout="closed")
    one_line_error(run, "standard output: the stream is closed")


# 3. -o renamed a temporary file over whatever was there: a FIFO, a device, a link to /proc/self/fd/1.


def special(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/null")  # a link to a device: refused as a link, like one to /proc/self/fd/1
    elif kind == "stdout-link":
        path.symlink_to("/proc/self/fd/1")
    return path


@pytest.mark.parametrize("kind", ["fifo", "device", "stdout-link"])
@pytest.mark.parametrize(
    "args",
    [
        ["export", "kimi-k2-instruct", "--format", "json", "-o"],
        ["manifest", "kimi-k2-instruct", "--predicted", "-o"],
        ["check", "kimi-k2-instruct", "--no-meta", "--allow-unverified", "--json", "--junit-xml"],
    ],
    ids=["export", "manifest", "junit"],
)
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_alone(
    args: list[str], kind: str, tmp_path: Path
) -> None:
    path = special(kind, tmp_path)
    before = os.lstat(path)
    run = archviz(*args, str(path), cwd=tmp_path)
    assert run.code == 2, run
    assert run.stderr.count("\n") == 1 and "archviz replaces only a regular file" in run.stderr, run
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_export_dash_o_dash_is_standard_output(tmp_path: Path) -> None:
    run = archviz("export", "kimi-k2-instruct", "--format", "json", "-o", "-", cwd=tmp_path)
    assert run.code == 0, run
    assert json.loads(run.stdout)["model"]
    assert not (tmp_path / "-").exists()


# 6. A compressed-tensors block_structure of [0, 0] was an internal error; [-128, -128] predicted [0, 0] scales.

K25 = Path(__file__).resolve().parents[1] / "data" / "released" / "kimi-k2.5" / "config.json"


def fp8_blocks(folder: Path, block: object) -> Path:
    config = json.loads(K25.read_text(encoding="utf-8"))
    quantization = config["text_config"]["quantization_config"]
    quantization["format"] = "float-quantized"
    quantization["config_groups"]["group_0"]["weights"] = {
        "num_bits": 8,
        "type": "float",
        "symmetric": True,
        "strategy": "block",
        "block_structure": block,
    }
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


BAD_BLOCKS = [[0, 0], [-128, -128], [128, 1.5], [128, 2**40]]


# Every bad block through inspect; the commands that read the config the same way with one of them each.
@pytest.mark.parametrize(
    ("block", "command"),
    [
        *((block, ["inspect"]) for block in BAD_BLOCKS),
        (BAD_BLOCKS[0], ["cost"]),
        (BAD_BLOCKS[1], ["check", "--no-meta"]),
        (BAD_BLOCKS[2], ["diff", "kimi-k2.5"]),
    ],
    ids=lambda value: " ".join(map(str, value)),
)
def test_a_block_structure_that_is_not_two_positive_whole_numbers_is_refused(
    block: list[object], command: list[str], tmp_path: Path
) -> None:
    folder = fp8_blocks(tmp_path / "model", block)
    run = archviz(command[0], str(folder), *command[1:], cwd=tmp_path)
    line = next(
        n for n, row in enumerate((folder / "config.json").read_text().splitlines(), 1) if "block_structure" in row
    )
    one_line_error(
        run,
        f"config.json:{line}: text_config.quantization_config.config_groups.group_0.weights.block_structure: "
        "must be two whole numbers from 1 to 2,147,483,648",
    )


# 9 and 10. The API printed a config's terminal escapes raw, and leaked AttributeError and TypeError on wrong types.


def api(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run against the installed API in a process of its own, under test_bounds' limits."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))

    return subprocess.run(
        [sys.executable, "-P", "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT,
        preexec_fn=limit,
        check=False,
    )


def test_the_api_prints_no_terminal_escape_of_a_config(tmp_path: Path) -> None:
    config = {**TINY_K2, "architectures": ["\x1b]0;owned\x07\x1b[2J"]}
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    script = (
        "import archviz\n"
        f"model = archviz.describe({str(folder)!r})\n"
        "print(model)\n"
        "print(model._repr_mimebundle_()['text/plain'])\n"
        "print(model.cost())\n"
    )
    run = api(script, tmp_path)
    assert run.returncode == 0, run
    assert "\\x1b]0;owned" in run.stdout
    assert "\x1b" not in run.stdout


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("archviz.describe(pathlib.Path('model')).name", None),
        ("archviz.describe('model', revision=7)", "revision: must be a str or None, not int"),
        ("archviz.describe('model', assume=['a'])", "assume: must be a mapping of keys to values, or None, not list"),
        ("archviz.describe('model', assume={1: 2})", "a key of assume: must be a str, not int"),
        ("archviz.describe('model', partial='no')", "partial: must be a bool (True or False), not str"),
        ("archviz.describe(7)", "model: must be a str, not int"),
        ("archviz.describe('model').cost(cache_dtype=8)", "cache_dtype: must be a str or None, not int"),
        ("archviz.describe('model').cost(prompt=10**4299)", "prompt=a longer number: prompt must be an integer"),
        ("archviz.describe('model').diff(7)", "other: must be a str, not int"),
        ("archviz.describe('model').diff('model', revision=[1])", "revision: must be a str or None, not list"),
        ("archviz.describe('model').check(checkpoint=7)", "checkpoint: must be a str or None, not int"),
        ("archviz.describe('model').check(meta='no')", "meta: must be a bool (True or False), not str"),
    ],
)
def test_the_api_refuses_wrong_types_as_bad_input(call: str, message: str | None, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_K2), encoding="utf-8")
    script = (
        "import pathlib, archviz\n"
        "from archviz.common.errors import InputError\n"
        f"try:\n    print(repr({call}))\n"
        "except InputError as error:\n    print('InputError:', error)\n"
    )
    run = api(script, tmp_path)
    assert run.returncode == 0 and not run.stderr, run
    if message is None:
        assert run.stdout == "'model'\n", run
    else:
        assert run.stdout.startswith("InputError: ") and message in run.stdout, run


# 14. The leftover cleanup globbed on the user's folder name: `s*` matched another site's staging folders.


@pytest.mark.parametrize("name", ["s*", "s?", "[s]1", "s1.old-x"])
def test_a_render_cleans_up_only_its_own_leftovers(name: str, tmp_path: Path) -> None:
    """A render of ``s1`` killed between the two renames of its swap left its old site in ``.s1.old-<random>``; a
    render into a folder whose name matches that by glob (or by prefix) used to move it in as its own, or delete it."""
    kept = tmp_path / ".s1.old-abcd1234" / "site"
    kept.mkdir(parents=True)
    (kept / "index.html").write_text("s1's site", encoding="utf-8")
    staging = tmp_path / ".s1.new-abcd1234"
    staging.mkdir()
    run = archviz("render", "kimi-k3", "--no-verify", "--jobs", "1", "--out", str(tmp_path / name), cwd=tmp_path)
    assert run.code == 0, run
    assert (kept / "index.html").read_text(encoding="utf-8") == "s1's site"
    assert staging.is_dir()
    assert (tmp_path / name / "index.html").read_text(encoding="utf-8") != "s1's site"


# 13. The right exit with the wrong words.


def test_a_fifo_config_is_named_as_a_fifo_not_as_missing(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    one_line_error(archviz("inspect", str(folder), cwd=tmp_path), "model: config.json is a FIFO, not a regular file")
    # Named itself (it was "not in the HF cache and the Hub cannot be reached"), and a device ("no such file").
    fifo = str(folder / "config.json")
    one_line_error(archviz("inspect", fifo, cwd=tmp_path), f"{fifo}: the config is a FIFO, not a regular file")
    one_line_error(archviz("inspect", "/dev/zero", cwd=tmp_path), "the config is a character device, not a regular")


def test_an_existing_folder_whose_name_holds_an_escape_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "odd\x1bname"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_K2), encoding="utf-8")
    run = archviz("inspect", str(folder), "--json", cwd=tmp_path)
    assert run.code == 0, run
    assert json.loads(run.stdout)["totals"]["parameters"] > 0
    one_line_error(archviz("inspect", "absent\x1bname", cwd=tmp_path), "'absent\\x1bname': not a model name")


def test_a_bad_assumed_value_is_blamed_on_the_assumption(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    config = {key: value for key, value in TINY_K2.items() if key != "rms_norm_eps"}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    run = archviz("inspect", str(folder), "--assume", 'rms_norm_eps="abc"', cwd=tmp_path)
    one_line_error(run, "archviz: error: --assume on the command line: rms_norm_eps: expected a number")
    assert "config.json" not in run.stderr


# 12. Two legal 255-byte folder names could not be rendered together: "File name too long", no file named.


def test_two_255_byte_model_names_render_together(tmp_path: Path) -> None:
    folders = []
    for letter in ("A", "a"):
        folder = tmp_path / (letter * 255)
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(TINY_K2), encoding="utf-8")
        folders.append(str(folder))
    run = archviz("render", *folders, "--no-verify", "--jobs", "1", "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert run.code == 0, run
    slugs = sorted(path.name for path in (tmp_path / "site").iterdir() if path.name.startswith("aaa"))
    assert slugs == ["a" * 200, "a" * 200 + "-2"]


# 7. Inside the caps, still minutes: a 99 MB config of 4.9 million keys.


def test_a_config_of_a_million_keys_is_refused_by_its_count(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    keys = ",".join(f'"k{index}":0' for index in range(1_000_000))
    (folder / "config.json").write_text(json.dumps(TINY_K2)[:-1] + ',"junk":{' + keys + "}}", encoding="utf-8")
    started = time.monotonic()
    run = archviz("inspect", str(folder), cwd=tmp_path)
    one_line_error(run, "model/config.json:1: the config holds more than 500,000 keys and array items")
    assert time.monotonic() - started < 30, run


def test_a_config_over_16_mib_is_refused_by_its_size(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY_K2, "junk": "x" * 16 * 2**20}), encoding="utf-8")
    run = archviz("inspect", str(folder), cwd=tmp_path)
    one_line_error(run, "more than the limit of 16,777,216")


# 7. A 16.6 MB modeling file took 3.4 GB of memory to parse, read even by a plain inspect.


def test_a_modeling_file_over_512_kib_is_refused_by_its_size(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_K2), encoding="utf-8")
    (folder / "modeling_deepseek.py").write_text("a\n" * 300_000, encoding="utf-8")
    run = archviz("inspect", str(folder), cwd=tmp_path)
    one_line_error(run, "modeling_deepseek.py: the file is 600,000 bytes, more than the limit of 524,288")


# 7. A 99 MB header of 1.4 million tensors took 73 s and 1.5 GB.


def test_a_header_over_32_mib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", 32 * 2**20 + 1) + b"{" + b" " * (32 * 2**20))
    run = archviz("manifest", "kimi-k2-instruct", "--checkpoint", str(path), "-o", "-", cwd=tmp_path)
    one_line_error(run, "x.safetensors: header length 33554433 bytes exceeds the limit of 33554432 bytes")
