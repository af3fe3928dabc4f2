"""Fuzzing every file archviz reads, run as one process under a memory limit (see ``test_bounds.py``).

Configs (values and JSON structure, quantization block structures), safetensors headers (their integers too),
safetensors indexes and manifests, and the options of ``plan`` and ``cost`` (counts, GPU figures), drawn by
hypothesis and fed to the real command line (typer's runner, in this process). Every case must end with exit code
0, 1, 2 or 3, a single ``archviz: error:`` line for 2, within ``DEADLINE_MS``; the process as a whole runs under the
memory limit its parent sets. The ``@example`` cases are the inputs of defects found so far: the corpus grows with
each one.

Run: ``python -P tests/bounds/fuzz_bounded.py EXAMPLES``; exit 0 when every case held, else the failing case is printed.
"""

from __future__ import annotations

import json
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from archviz.cli import app

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script under -P: the tests package is not on the path by itself
from tests.bounds.test_bounds import TINY_K2  # noqa: E402 - after the path is set

DEADLINE_MS = 10_000
DTYPES = ["BF16", "F32", "F16", "I64", "U8", "F8_E4M3", "F4", "BOOL", "Q4", "", "bf16"]

runner = CliRunner()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 10**400, 1_000_000, 10_000_000]),
    st.floats(),
    st.text(max_size=10),
    st.sampled_from(["re:(.|.)*X$", "re:(.|.)*[0-9]{9}$", "re:(", "\x1b[2J", "\u202e", "../../etc/passwd"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)


def deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """Tiny Kimi-K2 with a few values replaced, sometimes a quantization config or a wrapper around it."""
    document = dict(TINY_K2)
    for key in draw(st.lists(st.sampled_from(sorted(TINY_K2)), max_size=4)):
        document[key] = draw(values)
    if draw(st.booleans()):
        document[draw(st.text(max_size=8))] = draw(values)
    if draw(st.integers(0, 4)) == 0:
        document["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {"g": {"targets": draw(st.lists(scalars, max_size=3)), "weights": draw(values)}},
            "ignore": draw(st.lists(scalars, max_size=3)),
        }
    elif draw(st.integers(0, 4)) == 0:  # FP8 blocks: the block structure drawn
        document["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {
                "g": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 8,
                        "type": "float",
                        "strategy": "block",
                        "block_structure": draw(st.lists(block_sides, max_size=3) | values),
                    },
                }
            },
        }
    return document


block_sides = st.one_of(
    st.sampled_from([0, -128, 1, 128, 2**31, 2**31 + 1, 10**4299, 1.5, True, "128"]), st.integers(-(2**70), 2**70)
)
dimensions = st.one_of(st.integers(0, 5), st.sampled_from([2**32, 2**63, 2**64, 2**64 + 1, 10**4299]))
"""A header's shape dimensions: small ones mostly, and the integers that once hung or broke the arithmetic."""


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A safetensors file: a length prefix, a JSON header of tensors (often nearly right) and some data."""
    tensors: dict[str, Any] = {}
    offset = 0
    for name in draw(st.lists(st.text(min_size=1, max_size=40), max_size=5, unique=True)):
        shape = draw(st.lists(dimensions, max_size=3) | st.lists(st.sampled_from([2, 10**4299]), max_size=200))
        size = draw(st.integers(0, 64))
        tensors[name] = draw(
            st.sampled_from(
                [
                    {"dtype": draw(st.sampled_from(DTYPES)), "shape": shape, "data_offsets": [offset, offset + size]},
                    draw(values),
                ]
            )
        )
        offset += size
    if draw(st.booleans()):
        tensors["__metadata__"] = draw(values)
    text = json.dumps(tensors).encode()
    length = draw(st.sampled_from([len(text), len(text) + 1, 0, 2**63, draw(st.integers(0, 2**64 - 1))]))
    return struct.pack("<Q", length) + text + b"\0" * draw(st.integers(0, offset + 8))


@st.composite
def indexes(draw: st.DrawFn) -> Any:
    weight_map = draw(
        st.dictionaries(
            st.text(max_size=20), st.sampled_from(["model.safetensors", "../x", "", "a/b"]) | scalars, max_size=4
        )
    )
    return draw(
        st.sampled_from(
            [{"weight_map": weight_map}, {"metadata": draw(values), "weight_map": draw(values)}, draw(values)]
        )
    )


@st.composite
def manifests(draw: st.DrawFn) -> Any:
    tensor = st.fixed_dictionaries(
        {"name": st.text(max_size=20) | scalars, "shape": st.lists(st.integers(-1, 9), max_size=3) | values},
        optional={"dtype": st.sampled_from(DTYPES) | scalars, "file": scalars},
    )
    document = {
        "format": draw(st.sampled_from(["archviz-manifest", "other"])),
        "version": draw(st.sampled_from([1, 2, True, "1"])),
        "source": draw(st.sampled_from(["x", "predicted:x"]) | scalars),
        "revision": draw(scalars),
        "metadata": draw(values),
        "tensors": draw(st.lists(tensor, max_size=4) | values),
    }
    return draw(st.sampled_from([document, draw(values)]))


COUNTS = ["--tp", "--ep", "--pp", "--dp", "--gpus", "--batch", "--prompt", "--context"]
FIGURES = ["--gpu-memory", "--bandwidth", "--bf16", "--fp8", "--fp4"]
count_values = st.sampled_from(["0", "1", "-1", "2", "7", "8", "64", "1000000", "100000000", "9" * 4300, "1.5", "x"])
figure_values = st.sampled_from(["0", "-80", "inf", "nan", "1e308", "1e-300", "80", "0.5", "4.8", "9" * 400])


@st.composite
def plan_options(draw: st.DrawFn) -> list[str]:
    """``plan`` (sometimes ``cost``) with a few of its counts and GPU figures drawn."""
    command = draw(st.sampled_from(["plan", "plan", "cost"]))
    options: list[str] = ["--gpu", "h200"] if command == "plan" and draw(st.booleans()) else []
    for option in draw(st.lists(st.sampled_from(COUNTS if command == "plan" else COUNTS[5:]), max_size=3)):
        options += [option, draw(count_values)]
    if command == "plan":
        for option in draw(st.lists(st.sampled_from(FIGURES), max_size=3)):
            options += [option, draw(figure_values)]
    return [command, *options]


cases = st.one_of(
    st.tuples(st.just("options"), plan_options()),
    st.tuples(st.just("config"), configs()),
    st.tuples(st.just("header"), headers()),
    st.tuples(st.just("index"), indexes()),
    st.tuples(st.just("manifest"), manifests()),
)


def run_case(kind: str, data: Any) -> None:
    # Deeply nested inputs are built here: hypothesis cannot print them in its report.
    if kind == "deep-config":
        kind, data = "config", {**TINY_K2, "deep": deep(data)}
    elif kind == "deep-manifest":
        kind, data = "manifest", {"format": "archviz-manifest", "version": 1, "tensors": deep(data)}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        model = root / "model"
        model.mkdir()
        config = data if kind == "config" else TINY_K2
        try:
            text = json.dumps(config, indent=2)
        except (ValueError, RecursionError):
            text = "{}"
        (model / "config.json").write_text(text, encoding="utf-8")
        args = ["inspect", str(model)]
        if kind == "header":
            (model / "model.safetensors").write_bytes(data)
            args = ["check", str(model), "--no-meta"]
        elif kind in ("index", "manifest"):
            target = root / ("model.safetensors.index.json" if kind == "index" else "manifest.json")
            try:
                target.write_text(json.dumps(data), encoding="utf-8")
            except (ValueError, RecursionError):
                target.write_text("[", encoding="utf-8")
            args = ["check", str(model), "--no-meta", "--checkpoint", str(target)]
        if kind == "options":
            args = [data[0], "kimi-k2-instruct", *data[1:]]
        result = runner.invoke(app, args)
        detail = (kind, args[0], result.exit_code, result.stderr[-400:], repr(result.exception))
        assert result.exit_code in (0, 1, 2, 3), detail
        if result.exit_code == 2 and result.stderr.startswith("Usage: "):
            # A usage error (an option out of range) as typer's runner shows it: the console script's main() makes it
            # one line, which test_bounds_two runs as a real process.
            assert "Invalid value for" in result.stderr and len(result.stderr) < 2000, detail
        elif result.exit_code == 2:
            assert result.stderr.startswith("archviz: error: ") and result.stderr.count("\n") == 1, detail


BLOCKS_OF_ZERO = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "g": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [0, 0]},
        }
    },
}
_HUGE_HEADER = ('{"w":{"dtype":"F32","shape":[' + ",".join(["9" * 4300] * 300) + '],"data_offsets":[0,4]}}').encode()
HUGE_DIMENSIONS = struct.pack("<Q", len(_HUGE_HEADER)) + _HUGE_HEADER + b"\0" * 4


def main(examples: int) -> None:
    @settings(
        max_examples=examples,
        deadline=DEADLINE_MS,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases)
    # The defects found so far, each an input that once hung, blew up or was blamed on archviz.
    @example(("deep-config", 600))
    @example(("config", {**TINY_K2, "n_routed_experts": 10_000_000}))
    @example(("config", {"model_type": "qwen2_moe", "num_hidden_layers": 2, "num_experts": 3_000_000}))
    @example(
        (
            "config",
            {
                **TINY_K2,
                "quantization_config": {
                    "quant_method": "compressed-tensors",
                    "format": "pack-quantized",
                    "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 32}}},
                    "ignore": ["re:(.|.)*X$", "re:(.|.)*[0-9]{9}$"],
                },
            },
        )
    )
    @example(("header", struct.pack("<Q", 3475222254926655346) + b"root:x:0"))
    @example(("deep-manifest", 5000))
    @example(("index", {"weight_map": {"a": "../../etc/passwd"}}))
    @example(("options", ["plan", "--gpu", "h200", "--dp", "1000000"]))
    @example(("options", ["plan", "--gpu", "h200", "--gpu-memory", "nan"]))
    @example(("options", ["cost", "--prompt", "9" * 4300]))
    @example(("config", {**TINY_K2, "quantization_config": BLOCKS_OF_ZERO}))
    @example(("header", HUGE_DIMENSIONS))
    def case(drawn: tuple[str, Any]) -> None:
        run_case(*drawn)

    case()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
