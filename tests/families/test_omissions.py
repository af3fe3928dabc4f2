"""No part of a config is dropped silently: a sub-config the graph does not build is listed as not modelled, and
``check`` then says ``partial``, never ``agree``.

The first test runs every model_type the pinned transformers ships whose config class has sub-configs
(``PretrainedConfig.sub_configs``), each from its config class's defaults with its layer counts cut to two
(``fewer_layers``): which sub-configs a model builds does not depend on how many layers each has, and a model of two
layers is built and traced in a fraction of the time. A config transformers refuses with fewer layers is run as its
defaults are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import transformers
from typer.testing import CliRunner

from archviz.cli import app
from archviz.common.errors import InputError
from archviz.families import find_family
from archviz.pipeline import ModelDocs, describe_model
from archviz.transformers import internals

runner = CliRunner()
RELEASED_K25 = Path(__file__).parents[1] / "data" / "released" / "kimi-k2.5" / "config.json"


def _with_sub_configs() -> list[str]:
    found = []
    for model_type in sorted(transformers.CONFIG_MAPPING.keys()):
        config_class = internals.config_class(model_type)
        if config_class is not None and internals.sub_config_keys(config_class):
            found.append(model_type)
    return found


WITH_SUB_CONFIGS = _with_sub_configs()
KNOWN_BUGS: dict[str, str] = {}
"""Model types whose default config makes archviz fail with an internal error (a bug, not an omission): pinned, so
that a fix shows."""


LAYER_COUNTS = frozenset(
    {
        "num_hidden_layers",
        "num_layers",
        "n_layer",
        "n_layers",
        "encoder_layers",
        "decoder_layers",
        "num_encoder_layers",
        "num_decoder_layers",
        "depth",
    }
)
"""Keys that count a config's (or a sub-config's) layers."""


def fewer_layers(config: Any) -> Any:
    """``config`` with every layer count above two made two, and each list as long as that count (``layer_types``)
    cut to its first two items, in every sub-config; nothing else changes (the sub-config keys least of all)."""
    if not isinstance(config, dict):
        return config
    cut = {key: fewer_layers(value) for key, value in config.items()}
    for key in LAYER_COUNTS & cut.keys():
        count = cut[key]
        if isinstance(count, int) and not isinstance(count, bool) and count > 2:
            cut[key] = 2
            for name, value in cut.items():
                if isinstance(value, list) and len(value) == count:
                    cut[name] = value[:2]
    return cut


def describe(folder: Path, data: dict[str, Any]) -> ModelDocs:
    """The model of ``data`` with fewer layers; when transformers refuses that, of ``data`` itself (a config with no
    layer count to cut is described once)."""
    cut = fewer_layers(data)
    (folder / "config.json").write_text(json.dumps(cut, default=str))
    try:
        return describe_model(str(folder))
    except InputError:
        if cut == data:
            raise
        (folder / "config.json").write_text(json.dumps(data, default=str))
        return describe_model(str(folder))


def modelled(docs: ModelDocs) -> set[str]:
    """The sub-configs the graph builds: for the generic family, every one transformers' class was built from (the
    graph is read off that build); for a hand-written family, those it declares (``FamilyBuilds.modelled_configs``)
    and the one it reads its settings from."""
    if docs.code is not None:
        built = docs.code.tree.built
        return set(built.read_configs) if built is not None else set()
    family = find_family(docs.config, transformers_ships=lambda _: True)
    return {*family.builds.modelled_configs, *docs.config.root[:1]}


def test_the_pinned_transformers_has_many_model_types_with_sub_configs() -> None:
    assert len(WITH_SUB_CONFIGS) > 200, "the corpus below must not be vacuous"


@pytest.mark.parametrize(
    "model_type",
    [
        pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_BUGS[name], strict=True))
        if name in KNOWN_BUGS
        else name
        for name in WITH_SUB_CONFIGS
    ],
)
def test_no_sub_config_is_dropped_silently(model_type: str, tmp_path: Path) -> None:
    config_class = internals.config_class(model_type)
    assert config_class is not None
    try:
        data = config_class().to_dict()
    except Exception as exc:  # the class has no usable defaults: nothing for archviz to read
        pytest.skip(f"{config_class.__name__}() cannot be built from its defaults: {type(exc).__name__}")
    try:
        docs = describe(tmp_path, data)
    except InputError as error:
        # Refused with a reason (no causal-LM class, a key it cannot read): nothing is described, so nothing is
        # dropped. The message names the file.
        assert "config.json" in str(error)
        return
    present = {key for key in internals.sub_config_keys(config_class) if isinstance(data.get(key), dict)}
    omitted = set(docs.graph.omitted)
    for key in sorted(present - modelled(docs)):
        assert key in omitted, f"{model_type}: {key} is neither built nor listed as not modelled"
        assert any(sentence.startswith(key) for sentence in docs.graph.not_modelled), key
    assert not omitted & modelled(docs), "a sub-config both built and said to be left out"


# -- an unknown sub-config ---------------------------------------------------------------------------------------


def with_audio(config: dict[str, Any]) -> dict[str, Any]:
    return {**config, "audio_config": {"hidden_size": 1280, "num_hidden_layers": 32, "num_mel_bins": 128}}


def check(folder: Path, *options: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["check", str(folder), "--json", *options])
    return result.exit_code, json.loads(result.stdout)


def k25_with_audio(folder: Path) -> None:
    """Kimi-K2.5's released config, its layers cut to two (``fewer_layers``), with an audio_config beside its text
    and vision configs, written to ``folder``."""
    released = fewer_layers(json.loads(RELEASED_K25.read_text()))
    (folder / "config.json").write_text(json.dumps(with_audio(released), indent=2))


def test_an_unknown_audio_config_is_not_modelled_and_check_is_partial(tmp_path: Path) -> None:
    """Kimi-K2.5 with an audio_config beside its text and vision configs: listed, and the meta model agreeing on the
    rest does not make the whole model agree."""
    k25_with_audio(tmp_path)
    docs = describe_model(str(tmp_path))
    assert docs.graph.omitted == ("audio_config",)
    assert any(sentence.startswith("audio_config: not modelled") for sentence in docs.graph.not_modelled)
    code, report = check(tmp_path)
    assert report["outcome"] == "partial" and code == 3, report["problems"]
    assert report["omitted"] == ["audio_config"]
    assert {leg["name"]: leg["status"] for leg in report["legs"]}["meta model"] == "ran"
    result = runner.invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "200"})
    assert "partial" in result.stdout and "audio_config" in result.stdout and "✓ agree" not in result.stdout
    assert check(tmp_path, "--allow-unverified")[0] == 0


def test_an_audio_config_beside_a_language_model_is_not_modelled(write_config: Any) -> None:
    """The same for Kimi-K2's config, which the deepseek_v3 family reads whole."""
    folder = write_config(with_audio({}))
    docs = describe_model(str(folder))
    assert docs.graph.omitted == ("audio_config",)
    assert docs.totals.parameters == describe_model("kimi-k2-instruct").totals.parameters  # the text part unchanged
    code, report = check(folder)
    assert (code, report["outcome"]) == (3, "partial"), report["problems"]


def test_junit_names_what_is_not_modelled(tmp_path: Path) -> None:
    k25_with_audio(tmp_path)
    report = tmp_path / "check.xml"
    result = runner.invoke(app, ["check", str(tmp_path), "--junit-xml", str(report)])
    assert result.exit_code == 3
    from xml.etree import ElementTree

    cases = ElementTree.parse(report).getroot().findall("testcase")
    omitted = [case for case in cases if case.get("classname") == "archviz.not_modelled"]
    assert [case.get("name") for case in omitted] == ["audio_config"]
    skipped = omitted[0].find("skipped")
    assert skipped is not None and "audio_config: not modelled" in (skipped.get("message") or "")


def test_a_default_config_transformers_cannot_name_is_refused_naming_the_file(tmp_path: Path) -> None:
    """ERNIE-4.5-VL-MoE's default config: transformers builds it, then its own save-time renaming fails (a converter
    expects vision experts the config gives no module for). Bad input, one line naming the file, exit 2."""
    config_class = internals.config_class("ernie4_5_vl_moe")
    assert config_class is not None
    (tmp_path / "config.json").write_text(json.dumps(config_class().to_dict(), default=str))
    result = runner.invoke(app, ["inspect", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert f"{tmp_path / 'config.json'}: transformers cannot name the checkpoint tensors of" in result.output


def test_a_sub_config_the_built_class_holds_no_module_of_is_listed(tmp_path: Path) -> None:
    """Moshi's config declares an audio encoder and a depth decoder; MoshiForCausalLM builds the text model alone.
    What the class does not build is said to be left out (the config class declaring it is not enough)."""
    config_class = internals.config_class("moshi")
    assert config_class is not None
    (tmp_path / "config.json").write_text(json.dumps(config_class().to_dict(), default=str))
    docs = describe_model(str(tmp_path))
    assert docs.graph.omitted == ("audio_encoder_config", "depth_decoder_config")
    for key in docs.graph.omitted:
        assert any(sentence.startswith(f"{key}: not modelled;") for sentence in docs.graph.not_modelled), key
    assert not any(node.id.startswith(("audio", "depth")) for node in docs.graph.nodes)
