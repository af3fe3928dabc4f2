"""Hostile and broken input through the real command line.

Every case of the corpus below runs the real CLI (typer's CliRunner; a few cases as real subprocesses) and
must end the same way: exit code 2, nothing on stdout, and exactly one line on stderr,
``archviz: error: FILE[:LINE[:COLUMN]]: message``, with the exact message the case states. Beyond the corpus:

- remote code: a model folder whose ``auto_map`` names modeling files that write a marker file when imported;
  inspect, check, render and manifest without ``--trust-remote-code`` never write it (a canary proves that the
  files do write it once imported);
- escaping: a config, a modeling file and a checkpoint header carrying ``<script>`` and attribute breakers,
  rendered by ``archviz render`` and loaded in Chromium: nothing runs;
- atomic output: a render killed with SIGKILL while it writes leaves the previous site byte for byte;
- fuzzing: any text and any JSON-ish config through ``parse_config`` and ``describe_model`` gives a result or
  an ``InputError``, never another exception;
- the Hub: offline, unreachable (a closed port) and silent (a server that never answers), each a one-line
  error naming the HF cache and local folders, returned in bounded time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save as save_numpy
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.errors import InputError
from archviz.families import FAMILIES
from archviz.inputs.config import parse_config
from archviz.pipeline import describe_model

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "archviz" / "bundled"
K2: dict[str, Any] = json.loads((BUNDLED / "kimi-k2-instruct" / "config.json").read_text(encoding="utf-8"))
KIMI_LINEAR: dict[str, Any] = json.loads(
    (BUNDLED / "kimi-linear-48b-a3b-instruct" / "config.json").read_text(encoding="utf-8")
)
# Kimi-K2's released remote modeling_deepseek.py (only ever parsed): a folder holding it is cited from it.
K2_RELEASE = REPO / "tests" / "data" / "release-code" / "kimi-k2-instruct" / "modeling_deepseek.py"

# Kimi-K2's config shrunk so that `check` builds its meta-device model in a fraction of a second.
TINY_K2: dict[str, Any] = {
    **K2,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 8,
    "vocab_size": 256,
    "bos_token_id": 0,
    "eos_token_id": 1,
}
SUPPORTED = ", ".join(sorted(model_type for family in FAMILIES for model_type in family.model_types))

runner = CliRunner()


def k2_config(**changes: Any) -> str:
    """Kimi-K2's config with some values changed, formatted as the bundled file is (so its line numbers hold)."""
    return json.dumps({**K2, **changes}, indent=2)


def without(config: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in keys}


def invoke(args: list[str]) -> Result:
    return runner.invoke(app, args)


def assert_one_line_error(result: Result, expected: str) -> None:
    """Exit 2, nothing on stdout, and exactly ``archviz: error: EXPECTED`` on stderr: no traceback."""
    detail = (result.exit_code, result.stdout, result.stderr, repr(result.exception))
    assert result.exit_code == 2, detail
    assert result.stderr == f"archviz: error: {expected}\n", detail
    assert result.stdout == "", detail


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def fill(template: str, tmp_path: Path) -> str:
    """``{tmp}`` is the test's folder, ``{config}`` the corpus model's config.json."""
    return template.replace("{config}", str(tmp_path / "model" / "config.json")).replace("{tmp}", str(tmp_path))


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones included) by relative path, with its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


# --- the corpus: the MODEL argument (a config, a path, a repo id) ----------------------------------------------

# How each command takes MODEL; every case runs under each (unless it names fewer).
MODEL_COMMANDS: dict[str, list[str]] = {
    "inspect": ["inspect", "{model}"],
    "check": ["check", "{model}"],
    "render": ["render", "{model}", "--out", "{tmp}/site", "--no-verify"],
    "manifest": ["manifest", "{model}", "--predicted", "--output", "{tmp}/manifest.json"],
}


@dataclass(frozen=True)
class Case:
    """One bad input: files to create, the MODEL argument, and the exact message after ``archviz: error: ``."""

    id: str
    files: Mapping[str, str | bytes]
    message: str
    model: str = "{tmp}/model"
    options: tuple[str, ...] = ()
    commands: tuple[str, ...] = tuple(MODEL_COMMANDS)
    marks: tuple[Any, ...] = ()


def config_case(id: str, text: str | bytes, message: str, **more: Any) -> Case:
    return Case(id=id, files={"model/config.json": text}, message=message, **more)


LONG_NUMBER = "9" * 5000

CONFIG_CASES: list[Case] = [
    # JSON itself
    config_case(
        "invalid-json-trailing-comma",
        '{\n  "hidden_size": 7168,\n}',
        "{config}:3:1: invalid JSON: Expecting property name enclosed in double quotes",
    ),
    config_case(
        "invalid-json-missing-comma", '{\n  "a": 1\n  "b": 2\n}', "{config}:3:3: invalid JSON: Expecting ',' delimiter"
    ),
    config_case("empty-file", "", "{config}:1:1: invalid JSON: Expecting value"),
    config_case(
        "byte-order-mark",
        "\ufeff" + k2_config(),
        "{config}:1:1: invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)",
    ),
    config_case("not-utf8", b'{\n  "model_type": "\xff"\n}', "{config}:2: the config is not UTF-8 text"),
    config_case(
        "nested-too-deeply", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "{config}: invalid JSON: nested too deeply"
    ),
    # Regression: a 5000-digit integer escaped json.loads as a ValueError and a traceback.
    config_case(
        "integer-longer-than-python-converts",
        '{\n  "model_type": "kimi_k2",\n  "hidden_size": ' + LONG_NUMBER + "\n}",
        "{config}:3:18: invalid JSON: a number has more than 4300 digits",
    ),
    # not an object
    config_case("config-is-a-list", "[1, 2]", "{config}:1: the config must be a JSON object, not a list"),
    config_case("config-is-a-string", '"config"', "{config}:1: the config must be a JSON object, not a string"),
    config_case(
        "text-config-not-an-object",
        '{\n  "model_type": "kimi_k3",\n  "text_config": [1]\n}',
        "{config}:3: text_config must be a JSON object",
    ),
    # wrong types
    config_case(
        "string-where-a-dimension-goes",
        k2_config(kv_lora_rank="512"),
        "{config}:20: kv_lora_rank: expected a positive integer, got the string '512'",
    ),
    config_case(
        "float-dimension",
        k2_config(hidden_size=7168.0),
        "{config}:17: hidden_size: expected a positive integer, got 7168.0",
    ),
    config_case(
        "boolean-layer-count",
        k2_config(num_hidden_layers=True),
        "{config}:31: num_hidden_layers: expected a positive integer, got true",
    ),
    config_case(
        "list-where-an-object-goes",
        k2_config(rope_scaling=[32.0]),
        "{config}:50: rope_scaling: expected an object, got a list",
    ),
    config_case(
        "string-where-a-number-goes",
        k2_config(rms_norm_eps="1e-6"),
        "{config}:47: rms_norm_eps: expected a number, got the string '1e-6'",
    ),
    config_case(
        "string-where-a-flag-goes",
        k2_config(tie_word_embeddings="no"),
        "{config}:61: tie_word_embeddings: expected true or false, got the string 'no'",
    ),
    # zero, negative, absurd
    config_case(
        "zero-dimension", k2_config(hidden_size=0), "{config}:17: hidden_size: expected a positive integer, got 0"
    ),
    config_case(
        "negative-dimension",
        k2_config(hidden_size=-7168),
        "{config}:17: hidden_size: expected a positive integer, got -7168",
    ),
    config_case(
        "absurd-dimension",
        k2_config(hidden_size=71_680_000_000),
        "{config}:17: hidden_size: 71680000000 is not a plausible dimension (more than 2,147,483,647)",
    ),
    # Regression: 2**31 - 1 layers passed the dimension limit and kept the graph builder busy for hours.
    config_case(
        "absurd-layer-count",
        k2_config(num_hidden_layers=2**31 - 1),
        "{config}:31: num_hidden_layers: 2147483647 is not a plausible number of layers (more than 10,000)",
    ),
    # Regression: Infinity (and 1e400) passed as a "finite real number"; int() of it then raised OverflowError.
    config_case(
        "infinite-number",
        k2_config(rope_scaling={**K2["rope_scaling"], "original_max_position_embeddings": 1e400}),
        "{config}:56: rope_scaling.original_max_position_embeddings: expected a finite number, got inf",
    ),
    config_case(
        "nan", k2_config(rope_theta=float("nan")), "{config}:48: rope_theta: expected a finite number, got nan"
    ),
    # Regression: float() of a 400-digit integer raised OverflowError.
    config_case(
        "integer-beyond-float-range",
        k2_config(rope_theta=10**400),
        "{config}:48: rope_theta: 1000000000000000000000000000000000000... is too large for a number",
    ),
    # Found by the fuzz test below: families/blocks/rotary.py (yarn_softmax_scale) called float() on the raw value.
    config_case(
        "mscale-all-dim-not-a-number",
        k2_config(rope_scaling={**K2["rope_scaling"], "type": "linear", "mscale_all_dim": "silu"}),
        "{config}:55: rope_scaling.mscale_all_dim: expected a number, got the string 'silu'",
    ),
    # missing keys: all of them at once
    config_case(
        "missing-keys",
        json.dumps(without(K2, "vocab_size", "hidden_size", "num_attention_heads"), indent=2),
        "{config}: missing keys required by the deepseek_v3 family: vocab_size, hidden_size, num_attention_heads",
    ),
    config_case(
        "missing-keys-in-text-config",
        json.dumps({"model_type": "kimi_k2", "text_config": without(K2, "vocab_size", "kv_lora_rank")}, indent=2),
        "{config}: missing keys required by the deepseek_v3 family (in text_config): vocab_size, kv_lora_rank",
    ),
    # not a supported model
    config_case(
        "unknown-model-type",
        k2_config(model_type="no_such_model", architectures=["NoSuchModelForCausalLM"]),
        f"{{config}}:22: model_type 'no_such_model' is not a supported architecture (supported: {SUPPORTED})",
    ),
    config_case(
        "no-model-type",
        '{"hidden_size": 8}',
        f"{{config}}: no model_type is not a supported architecture (supported: {SUPPORTED})",
    ),
    # contradictory keys
    config_case(
        "top-k-larger-than-expert-count",
        k2_config(num_experts_per_tok=400),
        "{config}:30: num_experts_per_tok: top-k 400 is larger than n_routed_experts (384)",
    ),
    config_case(
        "dense-layers-beyond-layer-count",
        k2_config(first_k_dense_replace=99),
        "{config}:15: first_k_dense_replace: is larger than num_hidden_layers (61)",
    ),
    config_case(
        "layer-index-beyond-layer-count",
        json.dumps(
            {
                **KIMI_LINEAR,
                "linear_attn_config": {**KIMI_LINEAR["linear_attn_config"], "full_attn_layers": [4, 8, 99]},
            },
            indent=2,
        ),
        "{config}:18: linear_attn_config.full_attn_layers: layers [99] are outside 1–27 (num_hidden_layers)",
    ),
    config_case(
        "layer-index-zero",
        json.dumps(
            {**KIMI_LINEAR, "linear_attn_config": {**KIMI_LINEAR["linear_attn_config"], "kda_layers": [0, 1]}},
            indent=2,
        ),
        "{config}:28: linear_attn_config.kda_layers: layers [0] are outside 1–27 (num_hidden_layers)",
    ),
    config_case(
        "expert-groups-do-not-divide",
        k2_config(n_group=5),
        "{config}:25: n_group: n_routed_experts (384) is not divisible by n_group (5)",
    ),
    config_case(
        "pad-token-outside-vocabulary",
        k2_config(pad_token_id=163840),
        "{config}:69: pad_token_id: 163840 is not a token of the vocabulary (vocab_size 163840)",
    ),
]

PATH_CASES: list[Case] = [
    Case(
        "parent-relative-path", {}, "../no-such-archviz-model: no such file or folder", model="../no-such-archviz-model"
    ),
    Case("dot-dot-inside-a-repo-id", {}, "org/../name: no such file or folder", model="org/../name"),
    Case("absolute-path", {}, "/no/such/archviz/model: no such file or folder", model="/no/such/archviz/model"),
    Case("odd-characters-in-a-repo-id", {}, "org/<script>: no such file or folder", model="org/<script>"),
    Case("space-in-a-repo-id", {}, "org/na me: no such file or folder", model="org/na me"),
    # Regression: huggingface_hub's HFValidationError (`--` is not allowed) escaped as a traceback.
    Case("double-dash-in-a-repo-id", {}, "org/na--me: no such file or folder", model="org/na--me"),
    Case(
        "shell-characters",
        {},
        "na$me;rm: not a bundled model (kimi-k2-instruct, kimi-k2.5, kimi-k3, kimi-linear-48b-a3b-instruct), an "
        "existing folder or file, or a Hub repo id of the form org/name",
        model="na$me;rm",
    ),
    Case("empty-name", {}, "'': not a model name, folder or repo id", model=""),
    Case("nul-character", {}, "'a\\x00b': not a model name, folder or repo id", model="a\x00b"),
    # Regression: `$` let a trailing newline through to huggingface_hub, which raised HFValidationError.
    Case("newline-in-a-repo-id", {}, "'org/name\\n': not a model name, folder or repo id", model="org/name\n"),
    # Regression: the file system's ENAMETOOLONG escaped Path.is_dir() as an OSError traceback.
    Case("name-too-long", {}, f"{'x' * 300}: cannot access the path: File name too long", model="x" * 300),
    Case("folder-without-config", {"model/README.md": "hello"}, "{tmp}/model: the folder has no config.json"),
    Case(
        "file-that-is-not-json",
        {"notes.txt": "hello"},
        "{tmp}/notes.txt:1:1: invalid JSON: Expecting value",
        model="{tmp}/notes.txt",
    ),
    # Regression: a revision climbing out of the HF cache's refs/ folder was passed on unchecked.
    Case(
        "revision-with-dot-dot",
        {},
        "kimi-k2-instruct: invalid revision \"../../etc\": expected a branch, tag or commit sha (letters, digits, '.', "
        "'_', '-', '/'; no '..')",
        model="kimi-k2-instruct",
        options=("--revision", "../../etc"),
        commands=("inspect", "check", "manifest"),  # render takes no --revision
    ),
]

MODEL_CASES = CONFIG_CASES + PATH_CASES


@pytest.mark.parametrize(
    ("case", "command"),
    [
        pytest.param(case, command, id=f"{case.id}-{command}", marks=case.marks)
        for case in MODEL_CASES
        for command in case.commands
    ],
)
def test_bad_model_is_one_line_and_exit_2(case: Case, command: str, tmp_path: Path) -> None:
    write_files(tmp_path, {fill(name, tmp_path): content for name, content in case.files.items()})
    args = [fill(arg, tmp_path).replace("{model}", fill(case.model, tmp_path)) for arg in MODEL_COMMANDS[command]]

    result = invoke([*args, *case.options])

    assert_one_line_error(result, fill(case.message, tmp_path))
    assert not (tmp_path / "site").exists() and not list(tmp_path.glob(".site.*"))
    assert not (tmp_path / "manifest.json").exists()


# --- the corpus: checkpoints (`check MODEL --checkpoint X`, `manifest MODEL --checkpoint X`) --------------------


def safetensors_bytes(
    header: Mapping[str, Any] | str | bytes, data: bytes = b"", *, length: int | None = None
) -> bytes:
    """A safetensors file built by hand: 8-byte little-endian header length, header, data."""
    if isinstance(header, bytes):
        raw = header
    else:
        raw = (header if isinstance(header, str) else json.dumps(header)).encode("utf-8")
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def f32(shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


# A real file written by the safetensors library: one F32 tensor "x" of shape (2, 3), 24 data bytes.
REAL_FILE = save_numpy({"x": np.zeros((2, 3), dtype=np.float32)})
REAL_HEADER_END = 8 + struct.unpack("<Q", REAL_FILE[:8])[0]

CHECKPOINT_COMMANDS: dict[str, list[str]] = {
    "check": ["check", "{tmp}/model", "--checkpoint", "{checkpoint}"],
    "manifest": ["manifest", "{tmp}/model", "--checkpoint", "{checkpoint}", "--output", "{tmp}/manifest.json"],
}


@dataclass(frozen=True)
class CheckpointCase:
    """A bad checkpoint: files to create, the --checkpoint value, the exact message."""

    id: str
    files: Mapping[str, bytes | str]
    checkpoint: str
    message: str
    marks: tuple[Any, ...] = ()


def one_file(id: str, raw: bytes, message: str, **more: Any) -> CheckpointCase:
    return CheckpointCase(
        id=id,
        files={"ckpt/model.safetensors": raw},
        checkpoint="{tmp}/ckpt/model.safetensors",
        message="{tmp}/ckpt/model.safetensors: " + message,
        **more,
    )


SHARD_1 = "model-00001-of-00002.safetensors"
SHARD_2 = "model-00002-of-00002.safetensors"

CHECKPOINT_CASES: list[CheckpointCase] = [
    one_file("empty-file", b"", "file is truncated: 0 bytes, too short for the 8-byte header length"),
    one_file(
        "shorter-than-the-length", b"\x10\x00\x00", "file is truncated: 3 bytes, too short for the 8-byte header length"
    ),
    one_file(
        "header-length-exceeds-the-file",
        safetensors_bytes("{}", length=1000),
        "header length 1000 bytes exceeds the file: only 2 bytes follow the 8-byte length",
    ),
    one_file(
        "header-over-100-MB",
        safetensors_bytes("{}", length=100_000_001),
        "header length 100000001 bytes exceeds the limit of 33554432 bytes",
    ),
    one_file(
        "length-is-all-ones",
        b"\xff" * 8 + b"{}",
        f"header length {2**64 - 1} bytes exceeds the limit of 33554432 bytes",
    ),
    one_file(
        "truncated-inside-the-header",
        REAL_FILE[: REAL_HEADER_END - 10],
        f"header length {REAL_HEADER_END - 8} bytes exceeds the file: only {REAL_HEADER_END - 18} bytes follow the "
        "8-byte length",
    ),
    one_file(
        "truncated-inside-the-data",
        REAL_FILE[:-4],
        "tensor 'x': data_offsets [0, 24] run past the end of the file (20 bytes of data after the header)",
    ),
    one_file(
        "header-not-json",
        safetensors_bytes("{not json}"),
        "header is not valid JSON: Expecting property name enclosed in double quotes at character 1 of the header",
    ),
    one_file(
        "header-not-utf8", safetensors_bytes(b'{"\xff": 1}'), "header is not UTF-8: invalid byte at file offset 10"
    ),
    one_file("header-is-a-list", safetensors_bytes("[1, 2]"), "header must be a JSON object, found an array"),
    one_file(
        "tensor-named-twice",
        safetensors_bytes('{"a": {}, "a": {}}'),
        "header is not valid JSON: the key 'a' appears twice in one object",
    ),
    one_file(
        "offsets-overlap",
        safetensors_bytes({"a": f32([2], 0, 8), "b": f32([2], 4, 12)}, bytes(12)),
        "tensors 'a' and 'b' overlap: data_offsets [0, 8] and [4, 12]",
    ),
    one_file(
        "offsets-run-past-the-end",
        safetensors_bytes({"a": f32([2, 3], 0, 24)}, bytes(20)),
        "tensor 'a': data_offsets [0, 24] run past the end of the file (20 bytes of data after the header)",
    ),
    one_file(
        "offsets-disagree-with-the-shape",
        safetensors_bytes({"a": f32([2, 3], 0, 20)}, bytes(24)),
        "tensor 'a': data_offsets [0, 20] hold 20 bytes but shape [2, 3] of F32 needs 24",
    ),
    one_file(
        "unknown-dtype",
        safetensors_bytes({"a": {**f32([2], 0, 8), "dtype": "F12"}}, bytes(8)),
        "tensor 'a': unknown safetensors dtype \"F12\"",
    ),
    # A tensor name is a stranger's string: a line break in it must not break the one-line error.
    one_file(
        "line-break-in-a-tensor-name",
        safetensors_bytes({"a\nb": f32([2], 0, 4)}, bytes(4)),
        "tensor 'a\\nb': data_offsets [0, 4] hold 4 bytes but shape [2] of F32 needs 8",
    ),
    CheckpointCase(
        "index-names-a-missing-shard",
        {
            "ckpt/model.safetensors.index.json": json.dumps({"weight_map": {"x": SHARD_1, "y": SHARD_2}}),
            f"ckpt/{SHARD_1}": REAL_FILE,
        },
        "{tmp}/ckpt",
        f"{{tmp}}/ckpt/model.safetensors.index.json: index names shard '{SHARD_2}', which is not in {{tmp}}/ckpt",
    ),
    CheckpointCase(
        "index-names-a-shard-outside-its-folder",
        {"ckpt/model.safetensors.index.json": json.dumps({"weight_map": {"x": "../model.safetensors"}})},
        "{tmp}/ckpt/model.safetensors.index.json",
        '{tmp}/ckpt/model.safetensors.index.json: index names shard "../model.safetensors", which is not a plain file '
        "name",
    ),
    CheckpointCase(
        "index-not-json",
        {"ckpt/model.safetensors.index.json": '{\n  "weight_map": {,\n}'},
        "{tmp}/ckpt",
        "{tmp}/ckpt/model.safetensors.index.json:2:18: invalid JSON: Expecting property name enclosed in double quotes",
    ),
    CheckpointCase(
        "folder-without-weights",
        {"ckpt/README.md": "nothing here"},
        "{tmp}/ckpt",
        "{tmp}/ckpt: folder holds no *.safetensors files and no model.safetensors.index.json",
    ),
    CheckpointCase(
        "not-a-checkpoint-file",
        {"ckpt/weights.bin": b"\x00" * 16},
        "{tmp}/ckpt/weights.bin",
        "{tmp}/ckpt/weights.bin: unsupported file: expected a .safetensors file, a safetensors index, an archviz "
        "manifest or a folder",
    ),
    # locations that are neither a path nor a Hub repo id: refused before the HF cache or the Hub is asked
    CheckpointCase(
        "parent-relative-path",
        {},
        "../no-such-archviz-checkpoint",
        "../no-such-archviz-checkpoint: no such file or folder, and not a Hub repo id of the form org/name",
    ),
    CheckpointCase(
        "absolute-path",
        {},
        "/no/such/archviz/checkpoint",
        "/no/such/archviz/checkpoint: no such file or folder, and not a Hub repo id of the form org/name",
    ),
    CheckpointCase(
        "dot-dot-repo-id", {}, "org/..", "org/..: not a valid Hub repo id: '.' and '..' components are not allowed"
    ),
    CheckpointCase(
        "odd-characters-in-a-repo-id",
        {},
        "org/<script>",
        "org/<script>: not a valid Hub repo id: use letters, digits, '-', '_' and '.', start each part with a letter "
        "or digit and end it with a letter, digit or '_', and no '..' or '--'",
    ),
    CheckpointCase("nul-character", {}, "a\x00b", "a\\x00b: location contains a NUL character"),
]


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    """A tiny deepseek_v3 model folder (Kimi-K2's config, shrunk) citing Kimi-K2's released remote code."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_K2, indent=2), encoding="utf-8")
    shutil.copy(K2_RELEASE, folder / "modeling_deepseek.py")
    return folder


@pytest.mark.parametrize("command", list(CHECKPOINT_COMMANDS))
@pytest.mark.parametrize("case", [pytest.param(case, id=case.id, marks=case.marks) for case in CHECKPOINT_CASES])
def test_bad_checkpoint_is_one_line_and_exit_2(
    case: CheckpointCase, command: str, tiny_model: Path, tmp_path: Path
) -> None:
    write_files(tmp_path, case.files)
    args = [
        fill(arg, tmp_path).replace("{checkpoint}", fill(case.checkpoint, tmp_path))
        for arg in CHECKPOINT_COMMANDS[command]
    ]

    result = invoke(args)

    assert_one_line_error(result, fill(case.message, tmp_path))
    assert not (tmp_path / "manifest.json").exists()


# --- output folders ---------------------------------------------------------------------------------------------


NOT_A_SITE = (
    "the output folder is not empty and is not an archviz site (no .archviz-site); choose another folder or pass "
    "--force to replace it"
)


def test_render_refuses_a_folder_that_is_not_a_site_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "thesis"
    write_files(out, {"chapter1.tex": "years of work", "figures/plot.png": b"\x89PNG"})
    before = tree(out)

    refused = invoke(["render", "kimi-k2-instruct", "--out", str(out), "--no-verify"])

    assert_one_line_error(refused, f"{out}: {NOT_A_SITE}")
    assert tree(out) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["thesis"]  # no staging folder left beside it

    forced = invoke(["render", "kimi-k2-instruct", "--out", str(out), "--no-verify", "--force"])

    assert forced.exit_code == 0, forced.output
    assert (out / ".archviz-site").is_file() and not (out / "chapter1.tex").exists()


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda out: out.write_text("a file"), "the output exists and is not a folder"),
        (
            lambda out: out.symlink_to(out.parent / "elsewhere", target_is_directory=True),
            "the output is a symbolic link; name the folder itself",
        ),
    ],
    ids=["file", "symlink"],
)
def test_render_refuses_an_output_that_is_not_a_folder(
    prepare: Callable[[Path], Any], message: str, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep.txt").write_text("keep")
    out = tmp_path / "site"
    prepare(out)

    result = invoke(["render", "kimi-k2-instruct", "--out", str(out), "--no-verify"])

    assert_one_line_error(result, f"{out}: {message}")
    assert tree(tmp_path / "elsewhere") == {"keep.txt": b"keep"}


def test_render_refuses_a_missing_template_folder(tmp_path: Path) -> None:
    result = invoke(
        [
            "render",
            "kimi-k2-instruct",
            "--out",
            str(tmp_path / "site"),
            "--no-verify",
            "--template-dir",
            str(tmp_path / "none"),
        ]
    )

    assert_one_line_error(result, f"{tmp_path / 'none'}: the template folder does not exist")
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("{tmp}", "{tmp}: cannot write the manifest: Is a directory"),
        (
            "{tmp}/no/such/folder/m.json",
            "{tmp}/no/such/folder/m.json: cannot write the manifest: No such file or directory",
        ),
    ],
    ids=["folder", "missing-parent"],
)
def test_manifest_output_problems(output: str, message: str, tmp_path: Path) -> None:
    result = invoke(["manifest", "kimi-k2-instruct", "--predicted", "--output", fill(output, tmp_path)])

    assert_one_line_error(result, fill(message, tmp_path))


def test_a_symlinked_config_does_not_publish_a_file_outside_the_folder(tmp_path: Path) -> None:
    secret = tmp_path / "private" / "settings.json"  # any JSON object the user running archviz can read
    write_files(tmp_path, {"private/settings.json": k2_config(x_api_token="hunter2-secret")})
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").symlink_to(secret)

    result = invoke(["render", str(tmp_path / "model"), "--out", str(tmp_path / "site"), "--no-verify"])

    published = b"".join(tree(tmp_path / "site").values()) if (tmp_path / "site").exists() else b""
    assert result.exit_code == 2 and b"hunter2-secret" not in published


# --- remote code is never imported without consent -------------------------------------------------------------


EVIL_PREAMBLE = """\
# Planted by tests/bounds/test_hostile.py: importing this module writes a marker file.
import pathlib

pathlib.Path({marker!r}).write_text("imported: " + __name__ + "\\n", encoding="utf-8")
"""
EVIL_CONFIGURATION = """
from transformers import DeepseekV3Config


class EvilConfig(DeepseekV3Config):
    pass
"""
EVIL_MODELING = """
from transformers import DeepseekV3ForCausalLM, DeepseekV3Model

from .configuration_evil import EvilConfig


class EvilModel(DeepseekV3Model):
    config_class = EvilConfig


class EvilForCausalLM(DeepseekV3ForCausalLM):
    config_class = EvilConfig
"""


def plant_remote_code(folder: Path, marker: Path) -> None:
    """A tiny deepseek_v3 model whose auto_map names modeling files that write ``marker`` when imported."""
    config = {
        **TINY_K2,
        "auto_map": {
            "AutoConfig": "configuration_evil.EvilConfig",
            "AutoModel": "modeling_evil.EvilModel",
            "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
        },
    }
    write_files(
        folder,
        {
            "config.json": json.dumps(config, indent=2),
            "configuration_evil.py": EVIL_PREAMBLE.format(marker=str(marker)) + EVIL_CONFIGURATION,
            "modeling_evil.py": EVIL_PREAMBLE.format(marker=str(marker)) + EVIL_MODELING,
        },
    )


@pytest.mark.slow
def test_remote_code_is_never_imported_without_trust(tmp_path: Path) -> None:
    model, marker = tmp_path / "model", tmp_path / "MARKER"
    plant_remote_code(model, marker)
    before = tree(model)

    inspected = invoke(["inspect", str(model)])
    checked = invoke(["check", str(model), "--json"])  # builds transformers' DeepseekV3ForCausalLM on the meta device
    rendered = invoke(["render", str(model), "--out", str(tmp_path / "site")])  # verifies too
    manifest = invoke(["manifest", str(model), "--predicted", "--output", str(tmp_path / "manifest.json")])

    assert inspected.exit_code == 0, inspected.output
    assert checked.exit_code == 0, checked.output
    report = json.loads(checked.stdout)
    assert report["meta_class"] == "DeepseekV3ForCausalLM"
    # The cards cite the model's own file, which was not built: said, with the way to build it.
    [warning] = report["warnings"]
    assert warning.startswith("the cards cite modeling_evil.py (remote") and "--trust-remote-code" in warning
    assert rendered.exit_code == 0, rendered.output
    assert manifest.exit_code == 0, manifest.output
    assert not marker.exists()
    assert tree(model) == before  # not even compiled to bytecode (no __pycache__)
    assert not any(name.endswith(("modeling_evil", "configuration_evil")) for name in sys.modules)


def test_remote_code_canary_trust_does_import_it(tmp_path: Path) -> None:
    # Proves the test above is not vacuous: the planted files do write the marker once imported, and the only
    # difference is --trust-remote-code. A fresh process, so that transformers copies the module into a
    # modules cache inside tmp_path rather than the user's.
    model, marker = tmp_path / "model", tmp_path / "MARKER"
    plant_remote_code(model, marker)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "modules")}

    result = subprocess.run(
        [sys.executable, "-m", "archviz", "check", str(model), "--json", "--trust-remote-code"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert marker.read_text(encoding="utf-8").startswith("imported: ")
    assert json.loads(result.stdout)["meta_class"] == "EvilForCausalLM"


# --- escaping: hostile strings from a config, a modeling file and a header, in Chromium ------------------------

SCRIPT = "<script>window.__pwned=1;alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror="window.__pwned=1;alert(1)">'
CLOSE_SCRIPT = "</script><script>window.__pwned=1;alert(1)</script>"


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`archviz render` (verification included) of a model whose config, modeling file and checkpoint carry
    markup: strings transformers ignores, so that the meta model still builds and every leg runs."""
    root = tmp_path_factory.mktemp("hostile")
    config = {
        **TINY_K2,
        "architectures": [ATTRIBUTE],  # the model's title
        "topk_method": CLOSE_SCRIPT,  # a routing setting on the cards
        "scoring_func": ATTRIBUTE,
        "x_note": f"{SCRIPT} {ATTRIBUTE} {CLOSE_SCRIPT} \u2028 \u2029 &amp;",  # in the whole-config view
    }
    # The cited lines of the modeling file (the RMSNorm cards show them) end in a hostile comment.
    cited = "variance = hidden_states.pow(2).mean(-1, keepdim=True)"
    modeling = K2_RELEASE.read_text(encoding="utf-8").replace(cited, f"{cited}  # {SCRIPT} {ATTRIBUTE} {CLOSE_SCRIPT}")
    # The checkpoint's tensor names and metadata: today no header string reaches a page (the verification
    # sentence names the graph's tensors), but if one ever does, the checks below cover it.
    checkpoint = safetensors_bytes(
        {ATTRIBUTE: f32([2], 0, 8), SCRIPT: f32([1], 8, 12), "__metadata__": {"format": CLOSE_SCRIPT}}, bytes(12)
    )
    write_files(
        root / "hostile",
        {
            "config.json": json.dumps(config, indent=2),
            "modeling_deepseek.py": modeling,
            "model.safetensors": checkpoint,
        },
    )
    result = invoke(["render", str(root / "hostile"), "--out", str(root / "site")])
    assert result.exit_code == 0, result.output
    return root / "site"


def test_hostile_strings_are_escaped_in_every_file(hostile_site: Path) -> None:
    pages = sorted(hostile_site.rglob("*.html"))
    assert len(pages) > 40
    for path in pages:
        html = path.read_text(encoding="utf-8")
        for raw in (SCRIPT, ATTRIBUTE, "<img", "window.__pwned=1;alert(1)</"):
            assert raw not in html, (path.name, raw)
        home = path == hostile_site / "index.html"  # the home page also sorts its side-by-side table
        overview = path.name == "index.html" and not home  # an overview also explores its diagram
        own = 1 + home + overview  # archviz.js (the search index is loaded by it, on the first search)
        assert html.count("</script>") == own, path.name  # archviz's own script elements
    index = (hostile_site / "search-index.js").read_text(encoding="utf-8")
    for raw in ("<", ">", "\u2028", "\u2029"):
        assert raw not in index
    # The hostile text is there, as text: the config, the cited source line, the title.
    overview = (hostile_site / "hostile" / "index.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;" in overview
    norm = (hostile_site / "hostile" / "nodes" / "attention.q-a-norm.html").read_text(encoding="utf-8")
    assert "# &lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;" in norm


HOSTILE_PAGES = [
    "index.html",
    "hostile/index.html",
    "hostile/nodes/moe.selection.html",
    "hostile/nodes/attention.q-a-norm.html",
]


def test_hostile_pages_run_nothing_in_chromium(hostile_site: Path, browser: Any) -> None:
    context = browser.new_context()
    try:
        for relative in HOSTILE_PAGES:
            page = context.new_page()
            dialogs: list[str] = []
            errors: list[str] = []
            page.on("dialog", lambda dialog, seen=dialogs: (seen.append(dialog.message), dialog.dismiss()))
            page.on("pageerror", lambda error, seen=errors: seen.append(str(error)))
            page.goto((hostile_site / relative).as_uri())
            page.wait_for_load_state("load")
            page.fill("#search-input", "img")  # search results are built from the index: they must stay text
            page.wait_for_timeout(50)
            assert dialogs == [] and errors == [], relative
            assert page.evaluate("window.__pwned") is None, relative
            assert page.locator("img").count() == 0, relative
            sources = page.evaluate("Array.from(document.scripts, s => s.getAttribute('src'))")
            home = ["compare.js"] if relative == "index.html" else []  # the home page sorts its side-by-side table
            overview = ["explorer.js"] if relative.endswith("/index.html") else []  # the overview's diagram explorer
            # The search index is added when the search box is first used (the fill above).
            expected = ["archviz.js", *home, *overview, "search-index.js"]
            assert [src.rsplit("/", 1)[-1] for src in sources] == expected, relative
            assert (
                page.evaluate(
                    "Array.from(document.querySelectorAll('*')).some(e => Array.from(e.attributes).some("
                    "a => a.name.startsWith('on')))"
                )
                is False
            ), relative
            page.close()
        # The watch works: a page that does run script is caught.
        canary = hostile_site.parent / "canary.html"
        canary.write_text(f"<!DOCTYPE html><p>canary</p>{SCRIPT}", encoding="utf-8")
        page = context.new_page()
        seen: list[str] = []
        page.on("dialog", lambda dialog: (seen.append(dialog.message), dialog.dismiss()))
        page.goto(canary.as_uri())
        assert seen == ["1"] and page.evaluate("window.__pwned") == 1
    finally:
        context.close()


# --- atomic output: a render killed while it writes ------------------------------------------------------------


@pytest.mark.slow
def test_render_killed_mid_write_leaves_the_previous_site(tmp_path: Path) -> None:
    out = tmp_path / "site"
    first = invoke(["render", "kimi-linear-48b-a3b-instruct", "--out", str(out), "--no-verify"])
    assert first.exit_code == 0, first.output
    before = tree(out)

    # Four models (the same names twice get their own folders) keep the writer busy for seconds: long enough to
    # see the staging folder appear and kill the process while it is still filling it.
    models = ["kimi-k2-instruct", "kimi-linear-48b-a3b-instruct"] * 2
    process = subprocess.Popen(
        [sys.executable, "-m", "archviz", "render", *models, "--out", str(out), "--no-verify"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        staging: list[Path] = []
        while time.monotonic() < deadline and process.poll() is None:
            staging = [folder for folder in tmp_path.glob(".site.new-*") if any(folder.rglob("*.html"))]
            if staging:
                break
            time.sleep(0.005)
        assert staging, "the render finished (or failed) before its staging folder held a page"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert process.returncode == -signal.SIGKILL
    assert tree(out) == before
    assert staging[0].is_dir()  # killed mid-write: the half-written staging folder is still there
    # The next render removes it (its owner is dead) and replaces the site whole.
    again = invoke(["render", "kimi-k2-instruct", "--out", str(out), "--no-verify"])
    assert again.exit_code == 0, again.output
    assert (out / "kimi-k2-instruct" / "index.html").is_file() and not (out / "kimi-linear-48b-a3b-instruct").exists()
    assert not staging[0].exists()
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".site.")) == []


def test_a_site_caught_between_the_two_renames_is_put_back(tmp_path: Path) -> None:
    """A render killed after moving the old site away and before moving the new one in leaves the old site in
    `.site.old-*/site`; the next render puts it back before it checks the folder."""
    out = tmp_path / "site"
    assert invoke(["render", "kimi-k2-instruct", "--out", str(out), "--no-verify"]).exit_code == 0
    before = tree(out)
    parked = tmp_path / ".site.old-interrupted"
    parked.mkdir()
    out.rename(parked / "site")
    (tmp_path / ".site.new-interrupted").mkdir()  # the new site that never made it
    # A template folder that fails the render: only the recovery runs, and it must leave the site as it was.
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "card.html").write_text("{{ undefined_variable.field }}", encoding="utf-8")
    failed = invoke(["render", "kimi-k2-instruct", "--out", str(out), "--no-verify", "--template-dir", str(templates)])
    assert failed.exit_code == 2
    assert "the template failed: 'undefined_variable' is undefined" in failed.stderr
    assert tree(out) == before
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".site.")) == []


# --- fuzzing the config reader ------------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 1, 2, 7, 2**31 - 1, 2**31, 2**63, 10**400, -(10**400)]),
    st.floats(),  # NaN and Infinity included: json writes and reads them
    st.text(max_size=12),
    st.sampled_from(["512", "silu", "bfloat16", "fp8", "yarn", "<script>", "\n", "\x00", "\u2028"]),
)
# Values at the edges the readers must refuse cleanly: zero, negative, past 2**31 and past the float range,
# non-finite, and the wrong JSON type for every kind of setting.
edge_values = st.sampled_from(
    [0, -1, 1, 2**31 - 1, 2**31, 10**400, 1.5, float("inf"), float("-inf"), float("nan"), "512", "", None, True, [], {}]
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
# Keys archviz reads, so that random documents reach the families' validation, not only the family lookup.
KNOWN_KEYS = sorted({*K2, *KIMI_LINEAR, *KIMI_LINEAR["linear_attn_config"], *K2["rope_scaling"], "text_config"})
# Model types with a hand-written family, plus a few without: never one that transformers ships and archviz
# does not table, whose graph is read off a meta-device model (seconds per example).
MODEL_TYPES = sorted({model_type for family in FAMILIES for model_type in family.model_types} | {"", "no_such_model"})


def replace_some(draw: st.DrawFn, document: Mapping[str, Any], most: int) -> dict[str, Any]:
    """``document`` with 1 to ``most`` of its values replaced, mostly by edge values."""
    # A permutation, not sampled_from per key: sampled_from favours the first keys in sorted order.
    keys = draw(st.permutations(sorted(document)))[: draw(st.integers(1, most))]
    return {**document, **{key: draw(edge_values | edge_values | json_values) for key in keys}}


@st.composite
def jsonish_configs(draw: st.DrawFn) -> Any:
    """Random documents, random key sets, and the bundled configs with a few values replaced."""
    kind = draw(st.sampled_from(["random", "keys", "k2", "kimi-linear", "wrapped"]))
    if kind == "random":
        return draw(json_values)
    if kind == "keys":
        document = draw(st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), json_values, max_size=12))
        document["model_type"] = draw(st.sampled_from(MODEL_TYPES) | json_scalars)
        return document
    base = KIMI_LINEAR if kind == "kimi-linear" else K2
    document = replace_some(draw, base, 6)
    if draw(st.booleans()):  # reach into the nested objects too
        nested = "linear_attn_config" if kind == "kimi-linear" else "rope_scaling"
        document[nested] = replace_some(draw, base[nested], 2)
    if kind == "wrapped":
        return {"model_type": draw(st.sampled_from(["kimi_k3", "kimi_k2", "llava"])), "text_config": document}
    return document


def config_text(document: Any, indent: int | None) -> str:
    return json.dumps(document, indent=indent, allow_nan=True)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(text=st.text() | st.text(alphabet='{}[]":,0123456789.eE+- \n\tnulltruefalsNaIfiy').map(lambda t: "{" + t))
def test_any_text_gives_a_config_or_an_input_error(text: str) -> None:
    try:
        document = parse_config(text, display_path="config.json")
    except InputError as error:
        assert error.location.path == "config.json"
        return
    assert isinstance(document.data, dict)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(document=jsonish_configs(), indent=st.sampled_from([None, 0, 2]))
def test_any_json_gives_a_config_with_spans_or_an_input_error(document: Any, indent: int | None) -> None:
    text = config_text(document, indent)
    try:
        parsed = parse_config(text, display_path="config.json")
    except InputError:
        return
    assert config_text(parsed.data, None) == config_text(json.loads(text), None)  # as text: NaN != NaN
    lines = text.count("\n") + 1
    assert all(1 <= span.start <= span.end <= lines for span in parsed.spans.values())


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=jsonish_configs(), indent=st.sampled_from([None, 2]))
def test_any_config_gives_model_docs_or_an_input_error(document: Any, indent: int | None, tmp_path: Path) -> None:
    folder = tmp_path / "fuzz"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(config_text(document, indent), encoding="utf-8")
    # The K2 configs name modeling_deepseek.py in auto_map: K2's released file is cited (parsed once, then cached).
    if not (folder / "modeling_deepseek.py").exists():
        shutil.copy(K2_RELEASE, folder / "modeling_deepseek.py")
    try:
        docs = describe_model(str(folder))
    except InputError as error:
        assert error.location.path.startswith(str(folder)), error
        assert "\n" not in str(error), error
        return
    assert docs.totals.parameters >= 0


# --- the Hub: offline, unreachable, silent -----------------------------------------------------------------------
# huggingface_hub reads HF_HOME, HF_HUB_OFFLINE, HF_ENDPOINT and its timeouts when it is first imported, so these
# run the CLI as a fresh process with the environment set, as a user's shell would.

HUB_MISSING = (
    "org/name: not in the HF cache and the Hub cannot be reached{why}; pass a local folder holding config.json, or "
    "fill the cache with `hf download` on a machine that can reach the Hub"
)


HUB_SETTINGS = (
    "HF_HUB_OFFLINE",
    "HF_ENDPOINT",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
)
"""The Hub settings a test sets for itself: the caller's own (``HF_HUB_OFFLINE=1`` on a machine with no Hub) would
otherwise decide what the test sees."""


def run_cli(args: list[str], env: Mapping[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    inherited = {key: value for key, value in os.environ.items() if key not in HUB_SETTINGS}
    return subprocess.run(
        [sys.executable, "-m", "archviz", *args],
        cwd=REPO,
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_process_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"archviz: error: {expected}\n")


def test_offline_without_cache_names_the_cache_and_local_folders(tmp_path: Path) -> None:
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}

    inspected = run_cli(["inspect", "org/name"], env)
    checked = run_cli(["check", "kimi-k2-instruct", "--no-meta", "--checkpoint", "org/name"], env)

    assert_process_error(inspected, HUB_MISSING.format(why=" (or HF_HUB_OFFLINE is set)"))
    assert_process_error(
        checked,
        f"org/name: revision 'main' is not in the HF cache ({tmp_path / 'hf' / 'hub'}) and HF_HUB_OFFLINE is set, so "
        "the Hub was not asked; pass a local folder or populate the HF cache",
    )


def test_unreachable_hub_says_so_quickly(tmp_path: Path) -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 9)) == 0:
            pytest.skip("something listens on 127.0.0.1:9")
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_ETAG_TIMEOUT": "2",
        "HF_HUB_DOWNLOAD_TIMEOUT": "2",
    }
    refused = "ConnectError: [Errno 111] Connection refused"

    started = time.monotonic()
    inspected = run_cli(["inspect", "org/name"], env)
    # Regression: hf_hub_download retried a refused connection five times (1 + 2 + 4 + 8 + 8 s of backoff, each
    # retry logged on stderr) before archviz saw the error; one bounded request now decides.
    assert time.monotonic() - started < 30
    checked = run_cli(["check", "kimi-k2-instruct", "--no-meta", "--checkpoint", "org/name"], env)

    assert_process_error(inspected, HUB_MISSING.format(why=f" ({refused})"))
    assert_process_error(
        checked,
        f"org/name: revision 'main' is not in the HF cache ({tmp_path / 'hf' / 'hub'}) and the Hub cannot be reached "
        f"({refused}); pass a local folder or populate the HF cache",
    )


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An endpoint that accepts connections and never answers: only a timeout ends a request to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:  # closed below
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
    server.close()
    thread.join(timeout=5)
    for connection in held:
        connection.close()


def test_silent_hub_is_bounded_by_the_timeout(silent_server: str, tmp_path: Path) -> None:
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": silent_server,
        "HF_HUB_ETAG_TIMEOUT": "1",
        "HF_HUB_DOWNLOAD_TIMEOUT": "1",
    }

    started = time.monotonic()
    result = run_cli(["inspect", "org/name"], env)

    # Regression: hf_hub_download ignored HF_HUB_ETAG_TIMEOUT (archviz passed 10 s) and, on a timeout, retried
    # five more times with 60 s each: minutes of silence.
    assert time.monotonic() - started < 30
    assert_process_error(result, HUB_MISSING.format(why=" (ReadTimeout: timed out)"))


# --- the same corpus through a real process ----------------------------------------------------------------------


def test_corpus_through_a_real_process(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {
            "model/config.json": '{\n  "hidden_size": 7168,\n}',
            "ckpt/model.safetensors": safetensors_bytes("{}", length=100_000_001),
            "thesis/chapter1.tex": "years of work",
        },
    )
    cases = [
        (
            ["inspect", str(tmp_path / "model")],
            f"{tmp_path}/model/config.json:3:1: invalid JSON: Expecting property name enclosed in double quotes",
        ),
        (
            ["check", "kimi-k2-instruct", "--no-meta", "--checkpoint", str(tmp_path / "ckpt" / "model.safetensors")],
            f"{tmp_path}/ckpt/model.safetensors: header length 100000001 bytes exceeds the limit of 33554432 bytes",
        ),
        (
            ["render", "kimi-k2-instruct", "--out", str(tmp_path / "thesis"), "--no-verify"],
            f"{tmp_path}/thesis: {NOT_A_SITE}",
        ),
    ]
    for args, expected in cases:
        assert_process_error(run_cli(args, {}), expected)
    assert tree(tmp_path / "thesis") == {"chapter1.tex": b"years of work"}
