"""Config reading: line spans of every key, nested text_config, and errors that name file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archviz.common.errors import InputError
from archviz.inputs.config import load_config, parse_config
from archviz.inputs.resolve import bundled_config

# The public part of Kimi-K3's config, as its reference card shows it.
K3_PARTIAL = Path(__file__).parents[1] / "data" / "kimi-k3.config.partial.json"


def test_k2_key_spans_are_the_lines_the_cards_cite() -> None:
    document = load_config(bundled_config("kimi-k2-instruct"))
    lines = document.text.splitlines()
    assert document.span("vocab_size").start == 68  # type: ignore[union-attr]
    assert document.span("hidden_size").start == 17  # type: ignore[union-attr]
    rope = document.span("rope_scaling")
    assert (rope.start, rope.end) == (50, 58)  # type: ignore[union-attr]
    assert document.span("rope_scaling", "factor").start == 53  # type: ignore[union-attr]
    assert (document.spans[()].start, document.spans[()].end) == (1, 69)
    # Every span's first line names its key: the spans follow the text, not a table.
    for path, span in document.spans.items():
        if path:
            assert f'"{path[-1]}"' in lines[span.start - 1], path


def test_spans_follow_the_text_when_lines_move() -> None:
    original = bundled_config("kimi-k2-instruct").read_text()
    shifted = original.replace("{\n", "{\n\n\n", 1)
    document = parse_config(shifted, display_path="config.json")
    assert document.span("vocab_size").start == 70  # type: ignore[union-attr]


def test_compact_and_nested_configs() -> None:
    text = '{"text_config": {"a": 1,\n "b": {"c": [1,\n 2]}},\n "model_type": "kimi_k3"}'
    document = parse_config(text, display_path="config.json")
    assert document.root == ("text_config",)
    assert document.settings["a"] == 1
    span = document.span("b")
    assert (span.start, span.end) == (2, 3)  # type: ignore[union-attr]
    assert document.span("b", "c").end == 3  # type: ignore[union-attr]
    assert document.spans[("model_type",)].start == 4


def test_k3_partial_config_nested_text_config() -> None:
    document = load_config(K3_PARTIAL)
    assert document.root == ("text_config",)
    assert document.span("hidden_act").start == 14  # type: ignore[union-attr]
    assert document.span("linear_attn_config", "num_heads").start == 115  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ('{\n  "a": 1,\n  "b": 2,\n}', 4, 1, "invalid JSON: Expecting property name enclosed in double quotes"),
        ('{\n  "a": 1\n  "b": 2\n}', 3, 3, "invalid JSON: Expecting ',' delimiter"),
        ("", 1, 1, "invalid JSON: Expecting value"),
        ("[1, 2]", 1, None, "the config must be a JSON object, not a list"),
        ('"text"', 1, None, "the config must be a JSON object, not a string"),
        ('{"text_config": 3}', 1, None, "text_config must be a JSON object"),
    ],
)
def test_bad_json_names_file_line_and_column(text: str, line: int, column: int | None, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_config(text, display_path="some/config.json")
    assert caught.value.location.line == line
    assert caught.value.location.column == column
    assert caught.value.message == message
    expected = f"some/config.json:{line}" + (f":{column}" if column else "")
    assert str(caught.value).startswith(expected + ": ")


def test_non_utf8_config(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{\n"a": "\xff"}')
    with pytest.raises(InputError, match="not UTF-8") as caught:
        load_config(path)
    assert caught.value.location.line == 2


def test_deep_nesting_is_a_clean_error() -> None:
    with pytest.raises(InputError, match="invalid JSON"):
        parse_config("[" * 100_000 + "]" * 100_000, display_path="config.json")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the config"):
        load_config(tmp_path / "config.json")


def test_round_trip_matches_json_module() -> None:
    document = load_config(bundled_config("kimi-k2-instruct"))
    assert document.data == json.loads(document.text)
