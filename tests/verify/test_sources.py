"""Tests for archviz.provenance.sources: choosing the modeling file, the locator tables, and every node's citations.

Everything runs on real files: the installed transformers' modeling files of every hand-written family
(deepseek_v3, kimi_linear and the llama-style llama, mistral, qwen2, qwen3, mixtral, qwen3_moe) and of the
generic family's bert and gpt_oss, the bundled configs and published ones (tests/families/test_families.py's
``PUBLISHED``), copies of them in temporary model folders (as remote code, in a git checkout, in an HF-cache
snapshot), and Kimi-K2-Instruct's released remote modeling file (tests/data/release-code), byte for byte.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archviz.cli import app
from archviz.code.excerpts import (
    ExcerptLines,
    ExcerptOmission,
    covering_range,
    format_excerpt,
)
from archviz.code.finder import SiteMatch, find_site
from archviz.code.locators import Category, Locator, Role, Site, SiteKind, SourceOrigin
from archviz.code.pins import (
    RevisionKind,
    SourceFile,
    content_hash,
    load_source_file,
)
from archviz.code.syntax import SourceSpan, split_lines
from archviz.common.errors import InputError
from archviz.families import FAMILIES
from archviz.families.blocks.code import DecoderCode
from archviz.families.generic import locators as generic_locators
from archviz.families.llama.builder import Variant
from archviz.families.llama.variants import VARIANTS
from archviz.graph.nodes import Graph, NodeKind
from archviz.inputs.resolve import bundled_config
from archviz.pipeline import ModelDocs, describe_model
from archviz.provenance.evidence import MAX_EXCERPT_LINES
from archviz.provenance.modeling_file import ModelingSource, choose_source_file, remote_code_file
from archviz.provenance.sources import Coverage, GraphSources, coverage, locate_sources, source_entries
from archviz.transformers.package import transformers_source_file
from tests.families.test_families import PUBLISHED, tiny
from tests.imports import heavy_modules
from tests.verify.test_provenance import K2_CARD_EMBEDDING_EXCERPT

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"
RELEASE = DATA / "release-code" / "kimi-k2-instruct" / "modeling_deepseek.py"
"""Kimi-K2-Instruct's remote modeling file (its config's auto_map) at revision fd1984e2b7a3, as released."""
RELEASE_SHA256 = "1cd4c202343b81e27a3d3df8e7d2289e11160e092b61bc300f4846c3063e787a"
K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
K2_CONFIG = bundled_config(K2)
TRANSFORMERS_VERSION = importlib.metadata.version("transformers")
GIT = shutil.which("git")

# The float32 cast: the models' own code upcasts in forward; transformers' port upcasts inside the loss
# function its forward calls (and in generate()), which is what its file is cited for.
FLOAT_CAST = ("logits-float", "logits-float32")
MTP_ONLY = ("mtp.embedding", "mtp.enorm", "mtp.hnorm", "mtp.concat", "mtp.eh-proj", "mtp.head-norm", "mtp.head")
# Per family, the table entries transformers' file does not have, and a phrase of the reason. The
# llama-style files have every entry: their builder makes no float32 logits and no MTP layer.
EXPECTED_ABSENT: dict[str, dict[str, str]] = {
    **{variant.name: {} for variant in VARIANTS},
    "deepseek_v3": dict.fromkeys(MTP_ONLY, "no code in the modeling file"),
    "kimi_linear": {
        **dict.fromkeys(MTP_ONLY, "no code in the modeling file"),
        # transformers' kimi_linear port implements NoPE MLA only.
        "rotary-embedding": "no rotary position embedding",
        "attention.query-split": "no rotary position embedding",
        "attention.apply-rotary": "no rotary position embedding",
        "attention.query-concat": "no rotary position embedding",
    },
    "kimi_k25": {},  # K2's text model with no MTP layer, and the vision tower and projector
}
GROUPS_ABSENT = {"mtp": "no code in the modeling file"}


@cache
def docs_of(name: str) -> ModelDocs:
    return describe_model(name)


TRANSFORMERS_MODEL_TYPES = {family.name: family.transformers_model_type for family in FAMILIES}


@cache
def transformers_file(family_or_model_type: str) -> SourceFile:
    """transformers' modeling file of a hand-written family, or of a model_type (the generic family's)."""
    return transformers_source_file(TRANSFORMERS_MODEL_TYPES.get(family_or_model_type, family_or_model_type))


def locate(docs: ModelDocs, source: SourceFile) -> GraphSources:
    return locate_sources(docs.graph, docs.config, source, family=docs.family)


def text_of(source: SourceFile, start: int, end: int) -> str:
    return "\n".join(split_lines(source.text)[start - 1 : end])


def lines_of(text: str, start: int, end: int) -> list[str]:
    return text.split("\n")[start - 1 : end]


def git(folder: Path, *arguments: str) -> str:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    completed = subprocess.run(
        ["git", "-c", "user.name=archviz tests", "-c", "user.email=tests@archviz.invalid", *arguments],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return completed.stdout.strip()


# ---------------------------------------------------------------------------------------------------
# The locators the builders attach: every one, on the transformers file of its family


# Configs that make every node a hand-written builder can build: the bundled models, DeepSeek-V3 (MTP, the query
# LoRA), Moonlight (a plain query projection), Kimi Linear with rotary MLA, and every llama-style test config.
def _kimi_linear_with_rope() -> dict[str, object]:
    config: dict[str, object] = json.loads(bundled_config(KIMI_LINEAR).read_text())
    config["mla_use_nope"] = False
    return config


def corpus() -> tuple[Graph, ...]:
    """Graphs holding every node and group the hand-written families build."""
    return tuple(docs.graph for docs in corpus_docs())


@cache
def _corpus_folder() -> tempfile.TemporaryDirectory[str]:
    """Where the corpus's configs are written, once per test process; removed when the process ends (a
    ``TemporaryDirectory`` is finalized at exit), not left in the system's temporary folder."""
    return tempfile.TemporaryDirectory(prefix="archviz-locators-")


@cache
def corpus_docs() -> tuple[ModelDocs, ...]:
    """The models of ``corpus``, described by the pipeline (which cites transformers' files: none has remote code).
    Of the test configs, those a hand-written family takes (the others would go the generic path, which attaches no
    locator, at every collection of this file)."""
    from tests.families.test_families import TINY
    from tests.families.test_kimi_k25 import tiny_kimi_k25

    handwritten = {model_type for family in FAMILIES for model_type in family.model_types}
    root = Path(_corpus_folder().name)
    tiny = {name: config for name, config in TINY.items() if config["model_type"] in handwritten}
    configs = {"kimi-linear-rope": _kimi_linear_with_rope(), "kimi-k2.5": tiny_kimi_k25(), **tiny}
    for name, config in configs.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config, indent=2))
    names = [K2, KIMI_LINEAR, str(DATA / "deepseek-v3.config.json"), str(DATA / "moonlight-16b-a3b.config.json")]
    described = [docs_of(name) for name in [*names, *(str(root / name) for name in configs)]]
    return tuple(docs for docs in described if docs.graph.model.family != "generic")


def _cases(kind: str) -> dict[tuple[str, str], Locator]:
    """(family, id) -> locator, each distinct locator once (an MTP copy of a block node carries the main one)."""
    cases: dict[tuple[str, str], Locator] = {}
    seen: set[tuple[str, Locator]] = set()
    for graph in corpus():
        items = graph.nodes if kind == "node" else graph.groups
        for item in items:
            family = graph.model.family
            if item.locate is None or (family, item.locate) in seen:
                continue
            seen.add((family, item.locate))
            cases.setdefault((family, item.id), item.locate)
    return cases


NODE_CASES = sorted(_cases("node"))
GROUP_CASES = sorted(_cases("group"))


def check_matches(id: str, locator: Locator, source: SourceFile, absent: dict[str, str]) -> None:
    matches = [match for site in locator.sites for match in find_site(site, source)]
    if id in absent:
        assert not matches, f"{id} was expected to be absent from {source.path}"
        assert locator.absent is not None
        assert absent[id] in locator.absent
        # Absent by design, not by a silent miss: no site of the node is written for transformers' file.
        assert not [site for site in locator.sites if SourceOrigin.TRANSFORMERS in site.origins], id
        return
    assert matches, f"{id}: no site found in {source.path}"
    for match in matches:
        check_match_text(source, match)


def check_match_text(source: SourceFile, match: SiteMatch) -> None:
    """The lines a site found show what it looked for."""
    text = text_of(source, match.span.start, match.span.end)
    if match.site.kind is SiteKind.ATTRIBUTE:
        assert f"self.{match.needle}" in text
    elif match.site.kind is SiteKind.STATEMENT:
        assert match.needle in text
    elif match.site.kind in (SiteKind.FUNCTION, SiteKind.METHOD):
        assert f"def {match.needle}(" in text
    else:
        assert text.lstrip().startswith(("class ", "@"))


def file_of(family: str, locator: Locator) -> SourceFile:
    """transformers' file a locator's code is in: its family's, or (``Locator.file``) its part's (Kimi-K2.5's text
    model in modeling_deepseek_v3.py)."""
    if locator.file is None:
        return transformers_file(family)
    part = next(item for item in FAMILIES if item.name == family).builds.code_parts[locator.file]
    return transformers_file(part.transformers_model_type)


@pytest.mark.parametrize(("family", "id"), NODE_CASES, ids=[f"{f}:{i}" for f, i in NODE_CASES])
def test_every_node_locator_finds_its_code_in_transformers_file(family: str, id: str) -> None:
    locator = _cases("node")[(family, id)]
    check_matches(id, locator, file_of(family, locator), EXPECTED_ABSENT[family])


@pytest.mark.parametrize(("family", "id"), GROUP_CASES, ids=[f"{f}:{i}" for f, i in GROUP_CASES])
def test_every_group_locator_finds_its_code_in_transformers_file(family: str, id: str) -> None:
    locator = _cases("group")[(family, id)]
    check_matches(id, locator, file_of(family, locator), GROUPS_ABSENT)


# ---------------------------------------------------------------------------------------------------
# Every site against every file its family has: found where it is written for, absent where it is not

# Per family, the model's own released remote code the repository holds (a site written for remote code is tested
# there); the families without one have their remote-only sites untested (``test_remote_only_sites_...`` counts them).
RELEASED_CODE = {"deepseek_v3": RELEASE}
# Per family without released code here, how many of its sites are written for remote code only: Kimi-K2.5's text
# model (its own modeling_deepseek.py), Kimi Linear's modeling_kimi.py (its rotary MLA, block_sparse_moe, q_conv1d …)
# and the llama-style families' (the statements DeepSeek's remote code inherited: logits.float(), moe_infer).
UNTESTED_REMOTE_SITES = {
    "kimi_k25": 20,
    "kimi_linear": 38,
    "llama": 3,
    "mistral": 3,
    "mixtral": 6,
    "qwen2": 3,
    "qwen3": 3,
    "qwen3_moe": 6,
}


@cache
def released_file(family: str) -> SourceFile:
    return load_source_file(RELEASED_CODE[family], display_name=RELEASED_CODE[family].name)


def files_of(family: str, locator: Locator) -> dict[SourceOrigin, SourceFile]:
    """Every file the family has for a locator's code, by kind: transformers' port, and the released remote code
    where the repository holds it (a part's code, Kimi-K2.5's text model, is tested in transformers' file only)."""
    files = {SourceOrigin.TRANSFORMERS: file_of(family, locator)}
    if family in RELEASED_CODE and locator.file is None:
        files[SourceOrigin.REMOTE] = released_file(family)
    return files


def _site_cases() -> list[tuple[str, str, str, int, SourceOrigin]]:
    """(family, node or group, id, site index, file kind): every site of every locator, once per file."""
    cases = []
    for kind in ("node", "group"):
        for (family, id), locator in sorted(_cases(kind).items()):
            for origin in files_of(family, locator):
                cases.extend((family, kind, id, index, origin) for index in range(len(locator.sites)))
    return cases


def describe_site(site: Site) -> str:
    """A site in a few words: ``statement 'logits = logits.float()' in ('ForCausalLM',).forward``."""
    looked = f"'{site.needles[0]}'" if site.needles else "the class"
    where = f" in {site.classes}" + (f".{site.method}" if site.method else "") if site.classes else ""
    return f"{site.kind.value} {looked}{where}"


SITE_CASES = _site_cases()


@pytest.mark.parametrize(
    ("family", "kind", "id", "index", "origin"),
    SITE_CASES,
    ids=[f"{f}:{k}:{i}:site{n}@{o.value}" for f, k, i, n, o in SITE_CASES],
)
def test_every_site_finds_its_code_in_every_file_it_targets(
    family: str, kind: str, id: str, index: int, origin: SourceOrigin
) -> None:
    locator = _cases(kind)[(family, id)]
    site = locator.sites[index]
    source = files_of(family, locator)[origin]
    matches = find_site(site, source)
    said = f"{family} {kind} {id}: site {index} ({describe_site(site)})"
    if origin in site.origins:
        assert matches, f"{said} finds nothing in {source.path}, which it is written for"
        for match in matches:
            check_match_text(source, match)
    else:
        # A site that names only the other kind of file must not exist in this one: the targeting is exact.
        assert not matches, f"{said} is in {source.path}, which its origins {site.origins} leave out"


def test_the_released_file_is_kimi_k2s_byte_for_byte() -> None:
    assert hashlib.sha256(RELEASE.read_bytes()).hexdigest() == RELEASE_SHA256


def test_every_family_file_kind_has_its_sites_tested() -> None:
    tested = {(family, origin) for family, _, _, _, origin in SITE_CASES}
    assert {family for family, _ in tested} == {family.name for family in FAMILIES}
    assert ("deepseek_v3", SourceOrigin.REMOTE) in tested
    # Every site is written for at least one kind of file (``locators.only`` drops a site left with none).
    for (family, _), locator in [*_cases("node").items(), *_cases("group").items()]:
        for site in locator.sites:
            assert site.origins, (family, describe_site(site))


def test_remote_only_sites_of_families_without_released_code_are_counted() -> None:
    """Sites written only for remote code that the repository does not hold (Kimi Linear's modeling_kimi.py, the
    llama-style remote code DeepSeek's derives from): not testable here, so their number is pinned."""
    untested: dict[str, int] = {}
    for kind in ("node", "group"):
        for (family, _), locator in _cases(kind).items():
            if SourceOrigin.REMOTE in files_of(family, locator):
                continue
            count = sum(1 for site in locator.sites if site.origins == (SourceOrigin.REMOTE,))
            if count:
                untested[family] = untested.get(family, 0) + count
    assert untested == UNTESTED_REMOTE_SITES


@pytest.mark.parametrize(
    ("family", "id", "kind"),
    [(*case, "node") for case in NODE_CASES] + [(*case, "group") for case in GROUP_CASES],
    ids=[f"{f}:{i}" for f, i in NODE_CASES + GROUP_CASES],
)
def test_every_locator_is_well_formed(family: str, id: str, kind: str) -> None:
    locator = _cases(kind)[(family, id)]
    assert locator.claim.endswith(".") and locator.claim[0].isupper()
    assert isinstance(locator.category, Category) and locator.category is not Category.CONFIG
    assert locator.sites or locator.absent, "a locator without sites must say why"
    for site in locator.sites:
        assert site.role in (Role.DEFINITION, Role.USE)
        assert site.needles or site.kind is SiteKind.CLASS
        assert site.classes or site.kind is SiteKind.FUNCTION
        assert site.occurrence >= 1


def test_every_node_and_group_a_hand_written_family_builds_carries_a_locator() -> None:
    for graph in corpus():
        assert [node.id for node in graph.nodes if node.locate is None] == [], graph.model.name
        assert [group.id for group in graph.groups if group.locate is None] == [], graph.model.name


def test_the_corpus_holds_every_family_and_the_optional_parts() -> None:
    ids = {(family, id) for family, id in NODE_CASES}
    assert {family for family, _ in ids} == {family.name for family in FAMILIES}
    for family, id in (
        ("deepseek_v3", "attention.q-a-proj"),
        ("deepseek_v3", "attention.q-proj"),
        ("deepseek_v3", "mtp.enorm"),
        ("kimi_linear", "rotary-embedding"),
        ("kimi_linear", "attention.query-view"),
        ("kimi_linear", "kda.delta-rule"),
        ("qwen3", "attention.q-norm"),
        ("qwen3_moe", "moe.routing-weights"),
        ("qwen3_moe", "mlp.gate-proj"),
        ("mixtral", "moe.routed-expert"),
        ("kimi_k25", "vision.attention.qkv-proj"),
        ("kimi_k25", "projector.image-features"),
    ):
        assert (family, id) in ids


def test_mtp_copies_carry_the_main_locators_and_mtp_only_nodes_their_own() -> None:
    graph = docs_of(str(DATA / "deepseek-v3.config.json")).graph
    nodes = {node.id: node for node in graph.nodes}
    for id in ("input-norm", "moe.router", "attention.kv-b-proj"):
        assert nodes[f"mtp.{id}"].locate == nodes[id].locate
    enorm = nodes["mtp.enorm"].locate
    assert enorm is not None and enorm.sites == () and "no code in the modeling file" in (enorm.absent or "")


# ---------------------------------------------------------------------------------------------------
# Kimi-K2 on transformers' deepseek_v3 file


@pytest.fixture(scope="module")
def k2_sources() -> GraphSources:
    return locate(docs_of(K2), transformers_file("deepseek_v3"))


def test_k2_token_embedding_definition_use_and_config_lines(k2_sources: GraphSources) -> None:
    source = transformers_file("deepseek_v3")
    refs = k2_sources.nodes["token-embedding"].refs
    (definition,) = [ref for ref in refs if ref.role is Role.DEFINITION]
    (use,) = [ref for ref in refs if ref.role is Role.USE]
    assert "self.embed_tokens = nn.Embedding(" in text_of(source, definition.start, definition.end)
    assert "inputs_embeds = self.embed_tokens(input_ids)" in text_of(source, use.start, use.end)
    config_lines = {ref.start for ref in refs if ref.role is Role.CONFIG}
    assert config_lines == {17, 68}
    k2_text = K2_CONFIG.read_text()
    assert lines_of(k2_text, 17, 17) == ['  "hidden_size": 7168,']
    assert lines_of(k2_text, 68, 68) == ['  "vocab_size": 163840']
    for ref in refs:
        assert ref.url is not None
    assert definition.url == (
        f"https://github.com/huggingface/transformers/blob/v{TRANSFORMERS_VERSION}/src/transformers/models/"
        f"deepseek_v3/modeling_deepseek_v3.py#L{definition.start}-L{definition.end}"
    )
    config_ref = next(ref for ref in refs if ref.role is Role.CONFIG)
    assert config_ref.revision == "fd1984e2b7a3"
    assert config_ref.url == (
        f"https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/fd1984e2b7a3/config.json"
        f"#L{config_ref.start}-L{config_ref.end}"
    )


def test_k2_every_node_is_located(k2_sources: GraphSources) -> None:
    graph = docs_of(K2).graph
    assert coverage(k2_sources) == Coverage(located=len(graph.nodes), total=len(graph.nodes), unlocated=())
    source = transformers_file("deepseek_v3")
    for id in FLOAT_CAST:
        (use,) = [ref for ref in k2_sources.nodes[id].refs if ref.role is Role.USE]
        assert "loss = self.loss_function(logits=logits" in text_of(source, use.start, use.end)
        assert "inside the loss function" in k2_sources.nodes[id].evidence[0].claim or id == "logits-float32"
    for id, node in k2_sources.nodes.items():
        if node.located:
            assert node.reason is None
            assert any(ref.role is not Role.CONFIG for ref in node.refs), id
            assert node.evidence[0].direct and node.evidence[0].file == "modeling_deepseek_v3.py"


def test_kimi_linear_every_node_is_located() -> None:
    docs = docs_of(KIMI_LINEAR)
    sources = locate(docs, transformers_file("kimi_linear"))
    assert coverage(sources) == Coverage(located=len(docs.graph.nodes), total=len(docs.graph.nodes), unlocated=())
    source = transformers_file("kimi_linear")
    (definition,) = [ref for ref in sources.nodes["kda.beta"].refs if ref.role is Role.DEFINITION]
    assert "self.b_proj = nn.Linear(" in text_of(source, definition.start, definition.end)
    # The bundled Kimi Linear config has no pinned revision: a content hash pins it, with no web address.
    assert sources.config_file.revision_kind is RevisionKind.CONTENT_HASH
    assert sources.config_file.revision == content_hash(docs.config.text.encode())
    assert all(ref.url is None for ref in sources.nodes["kda.beta"].refs if ref.role is Role.CONFIG)


def test_deepseek_v3_mtp_layer_copies_are_located_and_mtp_only_nodes_are_not() -> None:
    sources = locate(docs_of(str(DATA / "deepseek-v3.config.json")), transformers_file("deepseek_v3"))
    for id in ("mtp.input-norm", "mtp.attention.kv-b-proj", "mtp.moe.router", "mtp.ffn-residual"):
        copy, main = sources.nodes[id], sources.nodes[id.removeprefix("mtp.")]
        assert copy.located
        assert [ref for ref in copy.refs if ref.role is not Role.CONFIG] == [
            ref for ref in main.refs if ref.role is not Role.CONFIG
        ]
    for id in MTP_ONLY:
        assert not sources.nodes[id].located
        assert "no code in the modeling file" in (sources.nodes[id].reason or "")
    assert set(coverage(sources).unlocated) == set(MTP_ONLY)


def test_second_occurrences_cite_the_ffn_half_of_the_block(k2_sources: GraphSources) -> None:
    source = transformers_file("deepseek_v3")

    def use(id: str) -> tuple[int, int]:
        (ref,) = [ref for ref in k2_sources.nodes[id].refs if ref.role is Role.USE]
        return ref.start, ref.end

    first, second = use("attention-residual"), use("ffn-residual")
    assert first[0] < second[0]
    for start, end in (first, second):
        assert text_of(source, start, end).strip() == "hidden_states = residual + hidden_states"
    mid = use("mid-residual")
    assert first[0] < mid[0] < second[0]
    assert text_of(source, *mid).splitlines()[-1].strip() == "residual = hidden_states"


# ---------------------------------------------------------------------------------------------------
# Evidence


def test_embedded_state_has_the_k2_cards_contextual_evidence(k2_sources: GraphSources) -> None:
    evidence = k2_sources.nodes["embedded-state"].evidence
    assert evidence[0].direct and evidence[0].category is Category.EMBEDDING
    context = [item for item in evidence if not item.direct]
    from_embedding = [item for item in context if item.from_node == "token-embedding"]
    code = next(item for item in from_embedding if item.file == "modeling_deepseek_v3.py")
    assert code.from_title == "Token embedding"
    assert code.claim == "The token embedding is a learned table of vocabulary × width rows, looked up by token ID."
    assert any(isinstance(part, ExcerptOmission) for part in code.excerpt)
    shown = [line for part in code.excerpt if isinstance(part, ExcerptLines) for line in part.lines]
    assert any("self.embed_tokens = nn.Embedding(" in line for line in shown)
    assert any("inputs_embeds = self.embed_tokens(input_ids)" in line for line in shown)
    # The token embedding's config lines are those of its keys (issue 23: they were the whole released
    # configuration, lines 15–68); the released configuration's sentence is the overview's.
    keys = next(item for item in from_embedding if item.file == "config.json")
    assert keys.category is Category.CONFIG
    assert keys.claim == "The configuration sets hidden_size = 7,168 and vocab_size = 163,840."
    released = k2_sources.configuration
    assert released is not None and released.claim.startswith("The released configuration: width 7,168, 61 layers")
    for phrase in ("top-8 of 384 routed experts", "route scale 2.827", "vocabulary 163,840", "YaRN RoPE", "untied"):
        assert phrase in released.claim
    assert {item.from_node for item in context} >= {"token-embedding", "model", "block"}
    model = next(item for item in context if item.from_node == "model")
    assert model.category is Category.TRANSFORMER and "61 blocks" in model.claim
    assert "float32" not in model.claim  # transformers' port does not upcast the logits
    block = next(item for item in context if item.from_node == "block")
    assert block.claim.endswith("the first block uses the dense MLP, the rest the MoE.")


def test_with_the_release_k2s_embedded_state_card_cites_the_reference_cards_lines() -> None:
    """The reference card of Kimi-K2's Embedded state: its token-embedding evidence is modeling_deepseek.py at
    fd1984e2b7a3, lines 1360–1441, with 1363–1439 omitted (tests/verify/test_provenance.py holds the same numbers)."""
    sources = locate(docs_of(K2), released_file("deepseek_v3"))
    evidence = sources.nodes["embedded-state"].evidence
    (code,) = [item for item in evidence if item.from_node == "token-embedding" and item.file == "modeling_deepseek.py"]
    assert code.spans == (
        SourceSpan(path="modeling_deepseek.py", start=1360, end=1362),
        SourceSpan(path="modeling_deepseek.py", start=1440, end=1441),
    )
    assert covering_range(code.spans) == (1360, 1441)
    assert [line.strip() for line in format_excerpt(list(code.excerpt)).split("\n")] == K2_CARD_EMBEDDING_EXCERPT
    # The transformer-blocks context spans the reference card's lines 1360–1616, ending with the float32 logits.
    model = next(item for item in evidence if item.from_node == "model")
    assert covering_range(model.spans) == (1360, 1616)
    assert text_of(released_file("deepseek_v3"), 1616, 1616).strip() == "logits = logits.float()"


def test_no_targeted_site_is_missed_on_the_families_own_files() -> None:
    """A targeted site that finds nothing is recorded, not skipped: none is, on any file a family has."""
    for docs in corpus_docs():
        sources = docs.sources
        assert sources.file.origin is SourceOrigin.TRANSFORMERS, docs.graph.model.name
        missed = {id: [describe_site(site) for site in sites] for id, sites in sources.missed.items()}
        assert missed == {}, docs.graph.model.name


def test_node_config_evidence_names_the_values(k2_sources: GraphSources) -> None:
    evidence = k2_sources.nodes["moe.routing-weights"].evidence
    config = next(item for item in evidence if item.direct and item.file == "config.json")
    assert config.claim == (
        "The configuration sets n_routed_experts = 384, num_experts_per_tok = 8, norm_topk_prob = true and "
        "routed_scaling_factor = 2.827."
    )
    rotary = next(item for item in k2_sources.nodes["rotary-embedding"].evidence if item.file == "config.json")
    assert "rope_scaling.factor = 32" in rotary.claim
    # A nested key cites its own line inside rope_scaling.
    lines = {line for span in rotary.spans for line in range(span.start, span.end + 1)}
    k2_lines = K2_CONFIG.read_text().split("\n")
    assert any('"factor": 32.0' in k2_lines[line - 1] for line in lines)


def test_excerpts_stay_bounded() -> None:
    for name, family in ((K2, "deepseek_v3"), (KIMI_LINEAR, "kimi_linear")):
        sources = locate(docs_of(name), transformers_file(family))
        items = [item for node in sources.nodes.values() for item in node.evidence]
        items += [item for group in sources.groups.values() for item in group]
        for item in items:
            shown = sum(len(part.lines) for part in item.excerpt if isinstance(part, ExcerptLines))
            assert 0 < shown <= MAX_EXCERPT_LINES, (item.claim, shown)


def test_source_entries_are_the_json_shape(k2_sources: GraphSources) -> None:
    entries = source_entries(k2_sources.nodes["lm-head"])
    assert [entry["role"] for entry in entries] == ["definition", "use", "config", "config", "config"]
    assert set(entries[0]) == {"file", "revision", "start", "end", "role", "url"}
    assert entries[0]["file"] == "modeling_deepseek_v3.py" and entries[0]["revision"] == f"v{TRANSFORMERS_VERSION}"
    assert json.loads(json.dumps(entries)) == entries


def test_a_node_without_a_locator_is_reported_not_located() -> None:
    docs = docs_of(K2)
    bare = dataclasses.replace(
        docs.graph,
        nodes=tuple(dataclasses.replace(node, locate=None) for node in docs.graph.nodes),
        groups=tuple(dataclasses.replace(group, locate=None) for group in docs.graph.groups),
    )
    sources = locate_sources(bare, docs.config, transformers_file("deepseek_v3"), family=docs.family)
    assert coverage(sources).located == 0
    assert "names no code" in (sources.nodes["token-embedding"].reason or "")
    # The config lines are still cited.
    assert {ref.start for ref in sources.nodes["token-embedding"].refs} == {17, 68}


def test_an_ambiguous_class_pattern_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    # Two families in one file: "Model" names neither uniquely.
    path = tmp_path / "modeling_two.py"
    path.write_text(
        "class APreTrainedModel: pass\nclass BPreTrainedModel: pass\n"
        "class AModel(APreTrainedModel):\n    def __init__(self):\n        self.embed_tokens = 1\n"
        "class BModel(BPreTrainedModel):\n    def __init__(self):\n        self.embed_tokens = 1\n"
    )
    docs = docs_of(K2)
    sources = locate(docs, load_source_file(path))
    reason = sources.nodes["token-embedding"].reason or ""
    assert not sources.nodes["token-embedding"].located
    assert "ambiguous" in reason and "AModel" in reason


def test_a_file_that_is_not_python_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "modeling_broken.py"
    path.write_text("class Broken(:\n    pass\n")
    with pytest.raises(InputError) as error:
        locate(docs_of(K2), load_source_file(path))
    assert error.value.location.line == 1


# ---------------------------------------------------------------------------------------------------
# Kimi-K2's released remote code: the same tables find MoEGate, the per-attention rotary and logits.float()


def test_the_tables_work_on_kimi_k2s_released_code() -> None:
    source = released_file("deepseek_v3")
    sources = locate(docs_of(K2), source)
    assert coverage(sources) == Coverage(located=44, total=44, unlocated=())
    assert sources.missed == {}  # every site written for remote code finds it

    def cited(id: str, role: Role) -> str:
        return "\n".join(text_of(source, ref.start, ref.end) for ref in sources.nodes[id].refs if ref.role is role)

    assert "logits = logits.float()" in cited("logits-float", Role.USE)
    assert "logits = F.linear(" in cited("moe.router", Role.USE)
    assert "self.rotary_emb = DeepseekV3YarnRotaryEmbedding(" in cited("rotary-embedding", Role.DEFINITION)
    assert "def yarn_find_correction_range(" in cited("rotary-embedding", Role.DEFINITION)
    assert "mul_(topk_weight" in cited("moe.combine", Role.USE)
    model = sources.groups["model"][0]
    assert model.claim.endswith("returning every position's logits in float32.")


# ---------------------------------------------------------------------------------------------------
# Choosing the file


def k2_folder(root: Path, *, modeling: str | None, name: str = "kimi-k2") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    shutil.copy(K2_CONFIG, folder / "config.json")
    if modeling is not None:
        (folder / "modeling_deepseek.py").write_text(modeling, encoding="utf-8")
    return folder


def choose(folder: Path | None, *, prefer: str = "auto", repo: str | None = None) -> ModelingSource:
    return choose_source_file(
        family_transformers_model_type="deepseek_v3",
        model_folder=folder,
        config_data=json.loads(K2_CONFIG.read_text()),
        repo=repo,
        revision=None,
        prefer=prefer,
    )


def test_remote_code_is_read_from_the_config_auto_map() -> None:
    data = json.loads(K2_CONFIG.read_text())
    assert remote_code_file(data) == ("modeling_deepseek.py", None)
    assert remote_code_file({"auto_map": {"AutoModel": "pkg.modeling_x.XModel"}}) == ("pkg/modeling_x.py", None)
    assert remote_code_file({"text_config": {"auto_map": {"AutoModel": "modeling_y.Y"}}}) == ("modeling_y.py", None)
    assert remote_code_file({}) == (None, None)
    for bad in ("../evil.Model", "/etc/passwd.X", "noclass", "a b.C"):
        file, problem = remote_code_file({"auto_map": {"AutoModelForCausalLM": bad}})
        assert file is None and problem is not None and "does not name a module" in problem
    file, problem = remote_code_file({"auto_map": {"AutoModel": "org/repo--modeling_z.Z"}})
    assert file is None and "another repository (org/repo)" in (problem or "")


def test_a_bundled_config_falls_back_to_transformers_and_says_why() -> None:
    chosen = choose(None, repo="moonshotai/Kimi-K2-Instruct")
    assert chosen.origin is SourceOrigin.TRANSFORMERS
    assert chosen.path == "modeling_deepseek_v3.py" and chosen.repo == "huggingface/transformers"
    assert chosen.revision_kind is RevisionKind.PACKAGE_VERSION
    assert chosen.fallback_reason is not None
    assert "modeling_deepseek.py" in chosen.fallback_reason and "no model folder" in chosen.fallback_reason
    with pytest.raises(InputError, match="no remote modeling code"):
        choose(None, prefer="remote")
    with pytest.raises(ValueError, match="prefer"):
        choose(None, prefer="somewhere")


def test_transformers_is_used_when_asked_even_with_remote_code(tmp_path: Path) -> None:
    folder = k2_folder(tmp_path, modeling="class DeepseekV3Model:\n    pass\n")
    assert choose(folder).origin is SourceOrigin.REMOTE
    asked = choose(folder, prefer="transformers")
    assert asked.origin is SourceOrigin.TRANSFORMERS and asked.fallback_reason is None
    missing = k2_folder(tmp_path, modeling=None, name="no-code")
    fallback = choose(missing)
    assert fallback.origin is SourceOrigin.TRANSFORMERS
    assert f"not in the model folder {missing}" in (fallback.fallback_reason or "")


def test_shifted_remote_copy_cites_the_same_code_seven_lines_down_then_pins_to_git(tmp_path: Path) -> None:
    original = transformers_file("deepseek_v3")
    lines = original.text.split("\n")
    inserted = [f"# local note {number}: not in the original file" for number in range(7)]
    modeling = "\n".join([*lines[:6], *inserted, *lines[6:]])
    folder = k2_folder(tmp_path, modeling=modeling)
    docs = describe_model(str(folder))
    assert docs.source.folder is not None

    remote = choose_source_file(
        family_transformers_model_type=docs.graph.model.transformers_model_type,
        model_folder=docs.source.folder,
        config_data=docs.config.data,
        repo=docs.source.repo,
        revision=docs.source.revision,
    )
    assert remote.origin is SourceOrigin.REMOTE and remote.fallback_reason is None
    assert remote.path == "modeling_deepseek.py"
    assert remote.revision_kind is RevisionKind.CONTENT_HASH
    assert remote.revision == content_hash((folder / "modeling_deepseek.py").read_bytes())
    assert remote.url_template is None

    shifted, base = locate(docs, remote), locate(docs, original)
    assert shifted.file.origin is SourceOrigin.REMOTE and base.file.origin is SourceOrigin.TRANSFORMERS
    assert coverage(shifted) == coverage(base)
    # transformers' port cited as remote code is still found in full, but the remote code's own statements are not
    # there: recorded as missed, not skipped (and none on transformers' file itself).
    assert base.missed == {}
    assert [site.needles for site in shifted.missed["model"]] == [
        ("past_key_values_length = 0",),
        ("if use_cache:",),
        ("logits = logits.float()",),
    ]
    compared = 0
    for id, node in base.nodes.items():
        code = [ref for ref in node.refs if ref.role is not Role.CONFIG]
        moved = [ref for ref in shifted.nodes[id].refs if ref.role is not Role.CONFIG]
        assert [(ref.role, ref.start + 7, ref.end + 7) for ref in code] == [
            (ref.role, ref.start, ref.end) for ref in moved
        ], id
        for before, after in zip(code, moved, strict=True):
            assert text_of(original, before.start, before.end) == text_of(remote, after.start, after.end)
            assert after.file == "modeling_deepseek.py" and after.revision == remote.revision and after.url is None
            compared += 1
        config = [ref for ref in node.refs if ref.role is Role.CONFIG]
        assert config == [ref for ref in shifted.nodes[id].refs if ref.role is Role.CONFIG]
    assert compared > 80

    if GIT is None:
        pytest.skip("git is not installed: the git-pinned half needs it")
    git(folder, "init", "--quiet")
    git(folder, "add", "config.json", "modeling_deepseek.py")
    git(folder, "commit", "--quiet", "-m", "model")
    head = git(folder, "rev-parse", "HEAD")
    pinned = choose_source_file(
        family_transformers_model_type="deepseek_v3",
        model_folder=folder,
        config_data=docs.config.data,
        repo=None,
        revision=None,
    )
    assert pinned.revision_kind is RevisionKind.GIT and pinned.revision == head
    refs = locate(docs, pinned).nodes["token-embedding"].refs
    assert {ref.revision for ref in refs if ref.role is not Role.CONFIG} == {head}


def test_an_hf_cache_snapshot_is_pinned_to_its_hub_commit(tmp_path: Path) -> None:
    sha = "fd1984e2b7a3" + "0" * 28
    snapshot = tmp_path / "hub" / "models--moonshotai--Kimi-K2-Instruct" / "snapshots" / sha
    snapshot.mkdir(parents=True)
    shutil.copy(K2_CONFIG, snapshot / "config.json")
    shutil.copy(RELEASE, snapshot / "modeling_deepseek.py")
    chosen = choose(snapshot)
    assert chosen.origin is SourceOrigin.REMOTE
    assert chosen.revision_kind is RevisionKind.HUB and chosen.revision == sha
    assert chosen.repo == "moonshotai/Kimi-K2-Instruct"
    sources = locate(docs_of(K2), chosen)
    (definition,) = [ref for ref in sources.nodes["token-embedding"].refs if ref.role is Role.DEFINITION]
    assert definition.url == (
        f"https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/{sha}/modeling_deepseek.py"
        f"#L{definition.start}-L{definition.end}"
    )
    assert sources.file.url == f"https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/{sha}/modeling_deepseek.py"
    assert sources.nodes["token-embedding"].evidence[0].repo == "moonshotai/Kimi-K2-Instruct"


PLANT = """\
import os
import pathlib

pathlib.Path(os.environ["ARCHVIZ_PLANT_MARKER"]).write_text("imported")
"""


def test_a_planted_remote_file_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modeling = PLANT + transformers_file("deepseek_v3").text
    folder = k2_folder(tmp_path, modeling=modeling)
    # The plant is live: running it writes its marker (before its own imports fail).
    control = tmp_path / "control-marker"
    subprocess.run(
        [sys.executable, str(folder / "modeling_deepseek.py")],
        env={**os.environ, "ARCHVIZ_PLANT_MARKER": str(control)},
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert control.exists()

    marker = tmp_path / "marker"
    monkeypatch.setenv("ARCHVIZ_PLANT_MARKER", str(marker))
    docs = describe_model(str(folder))
    chosen = choose_source_file(
        family_transformers_model_type="deepseek_v3",
        model_folder=docs.source.folder,
        config_data=docs.config.data,
        repo=None,
        revision=None,
        prefer="remote",
    )
    sources = locate(docs, chosen)
    assert coverage(sources).located == 44  # a copy of transformers' file: the loss call stands for the cast
    assert not marker.exists()
    assert "modeling_deepseek" not in sys.modules


def test_sources_imports_neither_torch_nor_transformers() -> None:
    script = (
        "from archviz.pipeline import describe_model\n"
        "from archviz.provenance.modeling_file import choose_source_file\n"
        "from archviz.provenance.sources import coverage, locate_sources\n"
        "docs = describe_model('kimi-k2-instruct')\n"
        "source = choose_source_file(family_transformers_model_type='deepseek_v3', model_folder=None,\n"
        "    config_data=docs.config.data, repo=None, revision=None)\n"
        "assert coverage(locate_sources(docs.graph, docs.config, source, family=docs.family)).located > 0\n"
    )
    assert heavy_modules(script) == []


def test_tensor_states_are_located_by_the_statement_that_produces_them(k2_sources: GraphSources) -> None:
    source = transformers_file("deepseek_v3")
    graph = docs_of(K2).graph
    for node in graph.nodes:
        if node.kind is not NodeKind.TENSOR or not k2_sources.nodes[node.id].located:
            continue
        uses = [ref for ref in k2_sources.nodes[node.id].refs if ref.role is Role.USE]
        assert uses, node.id
        # Each cites an assignment (the statement that produces the state).
        assert any("=" in text_of(source, ref.start, ref.end) for ref in uses), node.id


def test_a_wrapped_config_cites_keys_inside_text_config(tmp_path: Path) -> None:
    inner = json.loads(bundled_config(KIMI_LINEAR).read_text())
    folder = tmp_path / "wrapped"
    folder.mkdir()
    wrapped = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": inner}
    (folder / "config.json").write_text(json.dumps(wrapped, indent=2))
    docs = describe_model(str(folder))
    assert docs.config.root == ("text_config",)
    sources = locate(docs, transformers_file("kimi_linear"))
    text = (folder / "config.json").read_text()
    refs = sources.nodes["token-embedding"].refs
    cited = {lines_of(text, ref.start, ref.end)[0].strip() for ref in refs if ref.role is Role.CONFIG}
    assert cited == {'"hidden_size": 2304,', '"vocab_size": 163840', '"pad_token_id": 163839,'}
    assert sources.configuration is not None
    assert sources.configuration.claim.startswith("The released text configuration: width 2,304, 27 layers")
    assert "20 KDA (32 heads of 128) and 7 MLA layers" in sources.configuration.claim
    first = sources.configuration.excerpt[0]
    assert isinstance(first, ExcerptLines) and first.lines[0].strip() == '"text_config": {'
    norm = next(item for item in sources.nodes["final-norm"].evidence if item.file == "config.json")
    assert norm.claim.startswith("The text configuration sets hidden_size = 2,304")


# ---------------------------------------------------------------------------------------------------
# The llama-style families on transformers' files, with published configs (tests/families/test_families.py)

LLAMA_STYLE = {
    "llama-3.1-8b": "llama",
    "qwen3-8b": "qwen3",
    "mistral-7b-v0.3": "mistral",
    "qwen2-7b": "qwen2",
    "mixtral-8x7b": "mixtral",
    "qwen3-30b-a3b": "qwen3_moe",
}
# Structure flags the published configs leave off, at tiny sizes: each family's optional nodes.
VARIATIONS = {
    "llama-biases": ("llama-3.1-8b", {"attention_bias": True, "mlp_bias": True}),
    "qwen2-sliding": ("qwen2-7b", {"use_sliding_window": True}),
    "qwen3-sliding": ("qwen3-8b", {"use_sliding_window": True, "sliding_window": 16}),
    "mistral-sliding": ("mistral-7b-v0.3", {"sliding_window": 16}),
    "qwen3-moe-dense-layers": (
        "qwen3-30b-a3b",
        {"mlp_only_layers": [0], "use_sliding_window": True, "sliding_window": 16},
    ),
}


@pytest.fixture(scope="session")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A model folder per published config and per variation, by name."""
    root = tmp_path_factory.mktemp("published")
    configs = {name: PUBLISHED[name] for name in (*LLAMA_STYLE, *GENERIC_OWNERS)}
    configs |= {name: tiny(base, **changes) for name, (base, changes) in VARIATIONS.items()}
    folders: dict[str, Path] = {}
    for name, config in configs.items():
        folders[name] = root / name
        folders[name].mkdir()
        (folders[name] / "config.json").write_text(json.dumps(config, indent=2))
    return folders


def code_text(source: SourceFile, sources: GraphSources, id: str, role: Role) -> str:
    """The cited lines of one role of a node, joined."""
    return "\n".join(text_of(source, ref.start, ref.end) for ref in sources.nodes[id].refs if ref.role is role)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.name)
def test_every_llama_style_family_names_classes_its_file_defines(variant: Variant) -> None:
    code = variant.code
    defined = {
        node.name for node in ast.parse(transformers_file(variant.name).text).body if isinstance(node, ast.ClassDef)
    }
    named = [
        name
        for field in dataclasses.fields(DecoderCode)
        if field.name not in ("ffn_attributes", "remote_ffn_attributes", "rope_absent")
        for name in getattr(code, field.name)
    ]
    assert named and set(named) <= defined, set(named) - defined
    assert code.attention == (f"{code.model[0].removesuffix('Model')}Attention",)
    assert bool(code.moe) is (variant.moe is not None)


@pytest.mark.parametrize("name", [*LLAMA_STYLE, *VARIATIONS])
def test_every_node_and_group_a_llama_style_config_builds_carries_a_locator(
    name: str, published: dict[str, Path]
) -> None:
    graph = docs_of(str(published[name])).graph
    assert [node.id for node in graph.nodes if node.locate is None] == []
    assert [group.id for group in graph.groups if group.locate is None] == []


@pytest.mark.parametrize("name", [*LLAMA_STYLE, *VARIATIONS])
def test_llama_style_configs_are_located_in_full(name: str, published: dict[str, Path]) -> None:
    docs = docs_of(str(published[name]))
    family = docs.graph.model.family
    base = VARIATIONS[name][0] if name in VARIATIONS else name
    assert family == LLAMA_STYLE[base]
    sources = locate(docs, transformers_file(family))
    assert coverage(sources) == Coverage(located=len(docs.graph.nodes), total=len(docs.graph.nodes), unlocated=())
    modeling = f"modeling_{TRANSFORMERS_MODEL_TYPES[family]}.py"
    assert sources.file.path == modeling and sources.file.origin is SourceOrigin.TRANSFORMERS
    for id, node in sources.nodes.items():
        assert node.reason is None
        assert any(ref.role is not Role.CONFIG for ref in node.refs), id
        assert node.evidence[0].direct and node.evidence[0].file == modeling, id
    # Every group has code evidence: the model's forward, the block, attention, the MLP and the MoE.
    assert set(sources.groups) == {group.id for group in docs.graph.groups}
    # The pipeline cites the same file.
    assert coverage(docs.sources) == coverage(sources)


def test_llama_style_citations_show_each_familys_own_code(published: dict[str, Path]) -> None:
    def located(name: str) -> tuple[SourceFile, GraphSources]:
        docs = docs_of(str(published[name]))
        source = transformers_file(docs.graph.model.family)
        return source, locate(docs, source)

    source, llama = located("llama-3.1-8b")
    # Llama annotates the embedding's assignment; the entry cites it anyway.
    assert "inputs_embeds: torch.Tensor = self.embed_tokens(input_ids)" in code_text(
        source, llama, "embedded-state", Role.USE
    )
    assert "bias=config.attention_bias" in code_text(source, llama, "attention.q-proj", Role.DEFINITION)
    assert "ROPE_INIT_FUNCTIONS[" in code_text(source, llama, "rotary-embedding", Role.DEFINITION)
    split = [ref for ref in llama.nodes["attention.head-split"].refs if ref.role is Role.USE]
    assert [text_of(source, ref.start, ref.end).split("=")[0].strip() for ref in split] == [
        "hidden_shape",
        "query_states",
        "key_states",
        "value_states",
    ]
    assert "sliding" not in code_text(source, llama, "attention.sdpa", Role.DEFINITION)

    source, qwen2 = located("qwen2-7b")
    assert "self.q_proj = nn.Linear(" in code_text(source, qwen2, "attention.q-proj", Role.DEFINITION)
    assert "bias=True" in code_text(source, qwen2, "attention.q-proj", Role.DEFINITION)
    assert "bias=False" in code_text(source, qwen2, "attention.o-proj", Role.DEFINITION)
    assert qwen2.nodes["attention.q-proj"].evidence[0].claim.endswith("adding a learned bias.")
    assert "self.sliding_window = " in code_text(source, qwen2, "attention.sdpa", Role.DEFINITION)
    assert "create_sliding_window_causal_mask(" in code_text(source, qwen2, "attention.sdpa", Role.USE)

    source, qwen3 = located("qwen3-8b")
    assert "self.q_norm = Qwen3RMSNorm(" in code_text(source, qwen3, "attention.q-norm", Role.DEFINITION)
    assert "self.k_norm(self.k_proj(" in code_text(source, qwen3, "attention.k-norm", Role.USE)
    transposes = code_text(source, qwen3, "attention.head-transpose", Role.USE).splitlines()
    assert len(transposes) == 3 and all(line.endswith(".transpose(1, 2)") for line in transposes)

    source, mixtral = located("mixtral-8x7b")
    assert "self.gate = MixtralTopKRouter(config)" in code_text(source, mixtral, "moe.router", Role.DEFINITION)
    assert "router_logits.float()" in code_text(source, mixtral, "moe.scores", Role.USE)
    assert "self.experts = MixtralExperts(config)" in code_text(source, mixtral, "moe.routed-expert", Role.DEFINITION)
    assert "norm_topk_prob" not in mixtral.nodes["moe.routing-weights"].evidence[0].claim

    source, qwen3_moe = located("qwen3-30b-a3b")
    weights = code_text(source, qwen3_moe, "moe.routing-weights", Role.USE)
    assert "if self.norm_topk_prob:" in weights and "router_top_value.to(router_logits.dtype)" in weights
    assert "when norm_topk_prob is set" in qwen3_moe.nodes["moe.routing-weights"].evidence[0].claim


def test_qwen3_moe_dense_layers_cite_the_mlp_and_the_moe(published: dict[str, Path]) -> None:
    docs = docs_of(str(published["qwen3-moe-dense-layers"]))
    source = transformers_file("qwen3_moe")
    sources = locate(docs, source)
    assert {"mlp.gate-proj", "moe.router"} <= set(sources.nodes)
    assert "self.gate_proj = nn.Linear(" in code_text(source, sources, "mlp.gate-proj", Role.DEFINITION)
    mlp = sources.groups["mlp"][0]
    assert mlp.excerpt and text_of(source, mlp.spans[0].start, mlp.spans[0].start) == "class Qwen3MoeMLP(nn.Module):"
    block = sources.groups["block"][0]
    assert (
        block.claim.endswith("the first block uses the dense MLP, the rest the MoE.")
        and "sliding-window attention" in block.claim
    )


def test_llama_style_composed_claims(published: dict[str, Path]) -> None:
    def sources_of(name: str) -> GraphSources:
        docs = docs_of(str(published[name]))
        return locate(docs, transformers_file(docs.graph.model.family))

    llama = sources_of("llama-3.1-8b")
    assert llama.groups["model"][0].claim == (
        "The model embeds tokens, numbers positions from the cached length, builds the causal mask, applies all 32 "
        "blocks, normalizes and projects to vocabulary logits with an untied head; the logits keep the model's "
        "dtype in this file."
    )
    assert llama.groups["block"][0].claim == (
        "A block applies input RMSNorm, attention and a residual addition, then post-attention RMSNorm, the FFN and "
        "a second residual addition; every block uses the dense MLP."
    )
    # Regression: a dense llama-style config was described as "32 layers (the first 32 dense, the rest MoE)".
    assert llama.configuration is not None
    assert llama.configuration.claim == (
        "The released configuration: width 4,096, 32 layers, 32 attention heads, vocabulary 128,256, RoPE (llama3 "
        "scaling, θ 500,000), untied output head."
    )
    mixtral = sources_of("mixtral-8x7b")
    assert mixtral.configuration is not None and "top-2 of 8 routed experts" in mixtral.configuration.claim
    assert mixtral.groups["block"][0].claim.endswith("every block uses the MoE.")
    # Qwen2 with the window on: layers from max_window_layers (1 of the tiny config's 3) attend through it.
    windowed = sources_of("qwen2-sliding")
    assert "attention (through a sliding window in 2 of 3 blocks)" in windowed.groups["block"][0].claim
    assert "within the sliding window" in windowed.nodes["attention.sdpa"].evidence[0].claim


def test_check_strict_passes_on_a_llama_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(PUBLISHED["llama-3.1-8b"], indent=2))
    # Nothing independent runs without the meta model or a checkpoint: unverified, accepted here by name.
    args = ["check", str(tmp_path), "--strict", "--no-meta", "--allow-unverified"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "strict:" not in result.output and "not located" not in result.output


# ---------------------------------------------------------------------------------------------------
# The generic family: locators made per graph from module paths, on bert-base-uncased and gpt-oss-20b

# Per published config, every node the generic graph has, with the class that builds it and its attribute.
GENERIC_OWNERS: dict[str, dict[str, tuple[str, str]]] = {
    "bert-base-uncased": {
        "bert.embeddings.word-embeddings": ("BertEmbeddings", "word_embeddings"),
        "bert.embeddings.token-type-embeddings": ("BertEmbeddings", "token_type_embeddings"),
        "bert.embeddings.position-embeddings": ("BertEmbeddings", "position_embeddings"),
        "bert.embeddings.layernorm": ("BertEmbeddings", "LayerNorm"),
        "bert.encoder.layer.attention.self.query": ("BertSelfAttention", "query"),
        "bert.encoder.layer.attention.self.key": ("BertSelfAttention", "key"),
        "bert.encoder.layer.attention.self.value": ("BertSelfAttention", "value"),
        "bert.encoder.layer.attention.output.dense": ("BertSelfOutput", "dense"),
        "bert.encoder.layer.attention.output.layernorm": ("BertSelfOutput", "LayerNorm"),
        "bert.encoder.layer.intermediate.dense": ("BertIntermediate", "dense"),
        "bert.encoder.layer.output.dense": ("BertOutput", "dense"),
        "bert.encoder.layer.output.layernorm": ("BertOutput", "LayerNorm"),
        "cls.predictions.transform.dense": ("BertPredictionHeadTransform", "dense"),
        "cls.predictions.transform.layernorm": ("BertPredictionHeadTransform", "LayerNorm"),
        "cls.predictions.decoder": ("BertLMPredictionHead", "decoder"),
        # A parameter the head holds itself, beside its child modules.
        "cls.predictions.bias": ("BertLMPredictionHead", "bias"),
    },
    "gpt-oss-20b": {
        # In the root group: owned by the base model, the only class that builds the attribute.
        "model.embed-tokens": ("GptOssModel", "embed_tokens"),
        "model.layers.input-layernorm": ("GptOssDecoderLayer", "input_layernorm"),
        "model.layers.self-attn.q-proj": ("GptOssAttention", "q_proj"),
        "model.layers.self-attn.k-proj": ("GptOssAttention", "k_proj"),
        "model.layers.self-attn.v-proj": ("GptOssAttention", "v_proj"),
        "model.layers.self-attn.o-proj": ("GptOssAttention", "o_proj"),
        "model.layers.self-attn.sinks": ("GptOssAttention", "sinks"),
        "model.layers.post-attention-layernorm": ("GptOssDecoderLayer", "post_attention_layernorm"),
        "model.layers.mlp.router": ("GptOssMLP", "router"),
        "model.layers.mlp.experts": ("GptOssMLP", "experts"),
        "model.norm": ("GptOssModel", "norm"),
        # A child of the root module: owned by the architecture's class.
        "lm-head": ("GptOssForCausalLM", "lm_head"),
    },
}
# The parameter-free operators added beside the modules, in forward order (BERT's attention has no output projection
# of its own, so no core is typed there).
GENERIC_OPERATORS = {"gpt-oss-20b": ["model.layers.self-attn.kv-cache", "model.layers.self-attn.attention-core"]}
# Generic entries transformers' file does not have, with a phrase of the reason: none for these two.
GENERIC_ABSENT: dict[str, str] = {}
GENERIC_CASES = [(name, id) for name, owners in GENERIC_OWNERS.items() for id in owners]


def generic_graph(name: str, published: dict[str, Path]) -> tuple[Graph, SourceFile]:
    graph = docs_of(str(published[name])).graph
    assert graph.model.family == "generic"
    return graph, transformers_file(graph.model.transformers_model_type)


@pytest.mark.parametrize("name", GENERIC_OWNERS)
def test_generic_graphs_have_the_listed_nodes(name: str, published: dict[str, Path]) -> None:
    graph, source = generic_graph(name, published)
    learned = [node.id for node in graph.nodes if node.kind is NodeKind.LEARNED]
    assert learned == list(GENERIC_OWNERS[name])
    operators = [node.id for node in graph.nodes if node.kind is not NodeKind.LEARNED]
    assert operators == GENERIC_OPERATORS.get(name, [])
    nodes, groups = generic_locators(graph, source)
    assert list(nodes) == [node.id for node in graph.nodes]
    built = {node.id: node.locate for node in graph.nodes}
    for id in operators:  # built with their own locators: the statements of the attention's forward
        assert nodes[id] is built[id] and all(find_site(site, source) for site in nodes[id].sites), id
    assert list(groups) == [group.id for group in graph.groups]


@pytest.mark.parametrize(("name", "id"), GENERIC_CASES, ids=[f"{n}:{i}" for n, i in GENERIC_CASES])
def test_every_generic_node_locator_finds_its_attribute_in_its_owner(
    name: str, id: str, published: dict[str, Path]
) -> None:
    graph, source = generic_graph(name, published)
    locator = generic_locators(graph, source)[0][id]
    check_matches(id, locator, source, GENERIC_ABSENT)
    owner, attribute = GENERIC_OWNERS[name][id]
    assert {site.classes for site in locator.sites} == {(owner,)}
    definitions = [match for site in locator.sites if site.role is Role.DEFINITION for match in find_site(site, source)]
    (definition,) = definitions
    assert f"self.{attribute} = " in text_of(source, definition.span.start, definition.span.end)
    assert locator.claim.startswith(f"{owner} builds self.{attribute}")


@pytest.mark.parametrize("name", GENERIC_OWNERS)
def test_every_generic_group_locator_finds_its_class(name: str, published: dict[str, Path]) -> None:
    graph, source = generic_graph(name, published)
    groups = generic_locators(graph, source)[1]
    for group in graph.groups:
        check_matches(group.id, groups[group.id], source, {})
        assert all(site.classes == (group.title,) for site in groups[group.id].sites)


@pytest.mark.parametrize("name", GENERIC_OWNERS)
def test_generic_configs_are_located_in_full(name: str, published: dict[str, Path]) -> None:
    docs = docs_of(str(published[name]))
    sources = docs.sources
    assert coverage(sources) == Coverage(located=len(docs.graph.nodes), total=len(docs.graph.nodes), unlocated=())
    assert sources.file.path == f"modeling_{docs.graph.model.transformers_model_type}.py"
    kinds = {node.id: node.kind for node in docs.graph.nodes}
    for id, node in sources.nodes.items():  # a module where it is built; an operator where the forward runs it
        wanted = Role.DEFINITION if kinds[id] is NodeKind.LEARNED else Role.USE
        assert any(ref.role is wanted for ref in node.refs), id
    assert set(sources.groups) == {group.id for group in docs.graph.groups}
    # A generic graph's groups are module classes: their claims are not the decoder stack's composed ones.
    model = sources.groups["model"][0]
    assert (
        model.claim == f"{docs.graph.model.architecture} builds the model in __init__ and runs it in its forward pass."
    )


def test_generic_evidence_of_bert(published: dict[str, Path]) -> None:
    docs = docs_of(str(published["bert-base-uncased"]))
    source = transformers_file("bert")
    sources = docs.sources
    assert "self.dense = nn.Linear(config.intermediate_size, config.hidden_size)" in code_text(
        source, sources, "bert.encoder.layer.output.dense", Role.DEFINITION
    )
    assert "self.query(hidden_states)" in code_text(
        source, sources, "bert.encoder.layer.attention.self.query", Role.USE
    )
    # The head's bias is built but never called: the claim says only what the lines show.
    assert (
        sources.nodes["cls.predictions.bias"].evidence[0].claim == "BertLMPredictionHead builds self.bias in __init__."
    )
    embedding = sources.nodes["bert.embeddings.word-embeddings"].evidence[0]
    assert embedding.category is Category.EMBEDDING
    assert embedding.claim == (
        "BertEmbeddings builds self.word_embeddings (Embedding) in __init__ and uses it in its forward pass."
    )
    # BERT numbers positions with a learned table and ties its head by transformers' default.
    assert sources.configuration is not None
    assert "RoPE" not in sources.configuration.claim
    assert sources.configuration.claim.endswith("output head tied to the embedding.")


def test_generic_nodes_whose_owner_is_unknown_say_why(published: dict[str, Path], tmp_path: Path) -> None:
    bert, _ = generic_graph("bert-base-uncased", published)
    # Cited against another model's file, the owning classes are not there.
    docs = docs_of(str(published["bert-base-uncased"]))
    sources = locate_sources(bert, docs.config, transformers_file("gpt2"), family=docs.family)
    assert coverage(sources).located == 0
    reason = sources.nodes["bert.embeddings.word-embeddings"].reason or ""
    assert reason == (
        "source not located: its owner BertEmbeddings, which builds self.word_embeddings, is not defined in "
        "modeling_gpt2.py"
    )
    assert sources.groups == {}
    # A node in the root group below the base model names no owner: the attribute must be built by one class.
    gpt_oss, _ = generic_graph("gpt-oss-20b", published)
    path = tmp_path / "modeling_two.py"
    path.write_text(
        "class AModel:\n    def __init__(self):\n        self.embed_tokens = 1\n"
        "class BModel:\n    def __init__(self):\n        self.embed_tokens = 2\n"
    )
    nodes, groups = generic_locators(gpt_oss, load_source_file(path))
    assert nodes["model.embed-tokens"].sites == () and groups == {}
    assert nodes["model.embed-tokens"].absent == (
        "the node does not say which module class owns self.embed_tokens, and AModel, BModel in modeling_two.py "
        "build it"
    )
    assert "and no class in modeling_two.py builds it" in (nodes["model.norm"].absent or "")
    # A node that is not an attribute (generic's "unattributed" tensors) says so.
    odd = dataclasses.replace(
        gpt_oss.nodes[0], id="unattributed", title="Unattributed tensors", code="model.state_dict()"
    )
    nodes, _ = generic_locators(dataclasses.replace(gpt_oss, nodes=(odd,)), transformers_file("gpt_oss"))
    assert "is not an attribute of a module class" in (nodes["unattributed"].absent or "")
