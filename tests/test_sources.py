"""Tests for archviz.sources: choosing the modeling file, the locator tables, and every node's citations.

Everything runs on real files: the installed transformers' deepseek_v3 and kimi_linear modeling files, the
bundled configs, copies of them in temporary model folders (as remote code, in a git checkout, in an
HF-cache snapshot), and one skeleton in the shape of DeepSeek's remote code (tests/data/sources).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

from archviz.errors import InputError
from archviz.graph import NodeKind
from archviz.pipeline import ModelDocs, describe_model
from archviz.provenance import (
    ExcerptLines,
    ExcerptOmission,
    RevisionKind,
    SourceFile,
    content_hash,
    load_source_file,
    split_lines,
    transformers_source_file,
)
from archviz.resolve import bundled_config
from archviz.sources import (
    FAMILY_CODE,
    GROUP_LOCATORS,
    MAX_EXCERPT_LINES,
    NODE_LOCATORS,
    Category,
    Coverage,
    GraphSources,
    Locator,
    ModelingSource,
    Role,
    SiteKind,
    SourceOrigin,
    choose_source_file,
    coverage,
    find_site,
    locate_sources,
    locator_for,
    remote_code_file,
    source_entries,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
REMOTE_SHAPE = DATA / "sources" / "remote_deepseek_shape.py"
K2 = "kimi-k2-instruct"
KIMI_LINEAR = "kimi-linear-48b-a3b-instruct"
K2_CONFIG = bundled_config(K2)
TRANSFORMERS_VERSION = importlib.metadata.version("transformers")
GIT = shutil.which("git")

# Nodes transformers' own files genuinely lack, and a phrase their reason must say.
NOT_IN_TRANSFORMERS = {
    "logits-float": "does not upcast",
    "logits-float32": "does not upcast",
}
MTP_ONLY = ("mtp.embedding", "mtp.enorm", "mtp.hnorm", "mtp.concat", "mtp.eh-proj", "mtp.head-norm", "mtp.head")
# Per family, the table entries transformers' file does not have, and a phrase of the reason.
EXPECTED_ABSENT: dict[str, dict[str, str]] = {
    "deepseek_v3": {**NOT_IN_TRANSFORMERS, **dict.fromkeys(MTP_ONLY, "no code in the modeling file")},
    "kimi_linear": {
        **NOT_IN_TRANSFORMERS,
        **dict.fromkeys(MTP_ONLY, "no code in the modeling file"),
        # transformers' kimi_linear port implements NoPE MLA only.
        "rotary-embedding": "no rotary position embedding",
        "attention.query-split": "no rotary position embedding",
        "attention.apply-rotary": "no rotary position embedding",
        "attention.query-concat": "no rotary position embedding",
    },
}
GROUPS_ABSENT = {"mtp": "no code in the modeling file"}


@cache
def docs_of(name: str) -> ModelDocs:
    return describe_model(name)


@cache
def transformers_file(family: str) -> SourceFile:
    return transformers_source_file(FAMILY_CODE[family].family)


def locate(docs: ModelDocs, source: SourceFile) -> GraphSources:
    return locate_sources(docs.graph, docs.config, source)


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
# The tables: every entry, on the transformers file of its family


def _entries(tables: Mapping[str, Mapping[str, Locator]]) -> Iterator[tuple[str, str]]:
    for family, table in tables.items():
        for id in table:
            yield family, id


NODE_CASES = list(_entries(NODE_LOCATORS))
GROUP_CASES = list(_entries(GROUP_LOCATORS))


def check_matches(locator: Locator, source: SourceFile, absent: dict[str, str]) -> None:
    matches = [match for site in locator.sites for match in find_site(site, source)]
    if locator.id in absent:
        assert not matches, f"{locator.id} was expected to be absent from {source.path}"
        assert locator.absent is not None
        assert absent[locator.id] in locator.absent
        return
    assert matches, f"{locator.id}: no site found in {source.path}"
    for match in matches:
        text = text_of(source, match.span.start, match.span.end)
        if match.site.kind is SiteKind.ATTRIBUTE:
            assert f"self.{match.needle}" in text
        elif match.site.kind is SiteKind.STATEMENT:
            assert match.needle in text
        elif match.site.kind in (SiteKind.FUNCTION, SiteKind.METHOD):
            assert f"def {match.needle}(" in text
        else:
            assert text.lstrip().startswith(("class ", "@"))


@pytest.mark.parametrize(("family", "id"), NODE_CASES, ids=[f"{f}:{i}" for f, i in NODE_CASES])
def test_every_node_locator_finds_its_code_in_transformers_file(family: str, id: str) -> None:
    locator = NODE_LOCATORS[family][id]
    check_matches(locator, transformers_file(family), EXPECTED_ABSENT[family])


@pytest.mark.parametrize(("family", "id"), GROUP_CASES, ids=[f"{f}:{i}" for f, i in GROUP_CASES])
def test_every_group_locator_finds_its_code_in_transformers_file(family: str, id: str) -> None:
    check_matches(GROUP_LOCATORS[family][id], transformers_file(family), GROUPS_ABSENT)


@pytest.mark.parametrize(
    ("family", "id"), NODE_CASES + GROUP_CASES, ids=[f"{f}:{i}" for f, i in NODE_CASES + GROUP_CASES]
)
def test_every_entry_is_well_formed(family: str, id: str) -> None:
    locator = NODE_LOCATORS[family].get(id) or GROUP_LOCATORS[family][id]
    assert locator.id == id
    assert locator.claim.endswith(".") and locator.claim[0].isupper()
    assert isinstance(locator.category, Category) and locator.category is not Category.CONFIG
    assert locator.sites or locator.absent, "an entry without sites must say why"
    for site in locator.sites:
        assert site.role in (Role.DEFINITION, Role.USE)
        assert site.needles or site.kind is SiteKind.CLASS
        assert site.classes or site.kind is SiteKind.FUNCTION
        assert site.occurrence >= 1


@pytest.mark.parametrize(
    "name",
    [K2, KIMI_LINEAR, str(DATA / "deepseek-v3.config.json"), str(DATA / "moonlight-16b-a3b.config.json")],
)
def test_every_node_and_group_a_family_builds_has_a_locator(name: str) -> None:
    graph = docs_of(name).graph
    nodes, groups = NODE_LOCATORS[graph.model.family], GROUP_LOCATORS[graph.model.family]
    assert [node.id for node in graph.nodes if locator_for(nodes, node.id) is None] == []
    assert [group.id for group in graph.groups if locator_for(groups, group.id) is None] == []


def test_mtp_copies_reuse_the_main_entries_and_mtp_only_nodes_have_their_own() -> None:
    table = NODE_LOCATORS["deepseek_v3"]
    assert locator_for(table, "mtp.input-norm") is table["input-norm"]
    assert locator_for(table, "mtp.moe.router") is table["moe.router"]
    assert locator_for(table, "mtp.enorm") is table["mtp.enorm"]
    assert locator_for(table, "no-such-node") is None


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


def test_k2_every_node_is_located_but_the_float32_cast_transformers_lacks(k2_sources: GraphSources) -> None:
    graph = docs_of(K2).graph
    assert coverage(k2_sources) == Coverage(
        located=len(graph.nodes) - 2, total=len(graph.nodes), unlocated=("logits-float", "logits-float32")
    )
    for id, phrase in NOT_IN_TRANSFORMERS.items():
        node = k2_sources.nodes[id]
        assert not node.located and node.reason is not None
        assert node.reason.startswith("source not located")
        assert phrase in node.reason
        assert all(ref.role is Role.CONFIG for ref in node.refs)
    for id, node in k2_sources.nodes.items():
        if node.located:
            assert node.reason is None
            assert any(ref.role is not Role.CONFIG for ref in node.refs), id
            assert node.evidence[0].direct and node.evidence[0].file == "modeling_deepseek_v3.py"


def test_kimi_linear_every_node_is_located_but_the_float32_cast() -> None:
    docs = docs_of(KIMI_LINEAR)
    sources = locate(docs, transformers_file("kimi_linear"))
    assert coverage(sources) == Coverage(
        located=len(docs.graph.nodes) - 2, total=len(docs.graph.nodes), unlocated=tuple(NOT_IN_TRANSFORMERS)
    )
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
    assert set(coverage(sources).unlocated) == set(MTP_ONLY) | set(NOT_IN_TRANSFORMERS)


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
    released = next(item for item in from_embedding if item.file == "config.json")
    assert released.category is Category.CONFIG
    assert released.claim.startswith("The released configuration: width 7,168, 61 layers")
    for phrase in ("top-8 of 384 routed experts", "route scale 2.827", "vocabulary 163,840", "YaRN RoPE", "untied"):
        assert phrase in released.claim
    assert {item.from_node for item in context} >= {"token-embedding", "model", "block"}
    model = next(item for item in context if item.from_node == "model")
    assert model.category is Category.TRANSFORMER and "61 blocks" in model.claim
    assert "float32" not in model.claim  # transformers' port does not upcast the logits
    block = next(item for item in context if item.from_node == "block")
    assert block.claim.endswith("the first 1 block uses the dense MLP, the rest the MoE.")


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


def test_a_family_without_tables_is_reported_not_located() -> None:
    docs = docs_of(K2)
    graph = dataclasses.replace(docs.graph, model=dataclasses.replace(docs.graph.model, family="unknown"))
    sources = locate_sources(graph, docs.config, transformers_file("deepseek_v3"))
    assert coverage(sources).located == 0
    assert "no locator" in (sources.nodes["token-embedding"].reason or "")
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
# The remote code's shape: the same tables find MoEGate, the per-attention rotary and logits.float()


def test_the_tables_work_on_remote_code_shaped_like_deepseeks() -> None:
    source = load_source_file(REMOTE_SHAPE, display_name="modeling_deepseek.py")
    sources = locate(docs_of(K2), source)
    assert coverage(sources) == Coverage(located=44, total=44, unlocated=())

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
    shutil.copy(REMOTE_SHAPE, snapshot / "modeling_deepseek.py")
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
    assert coverage(sources).located == 42
    assert not marker.exists()
    assert "modeling_deepseek" not in sys.modules


def test_sources_imports_neither_torch_nor_transformers() -> None:
    script = (
        "import sys\n"
        "from archviz.pipeline import describe_model\n"
        "from archviz.sources import choose_source_file, coverage, locate_sources\n"
        "docs = describe_model('kimi-k2-instruct')\n"
        "source = choose_source_file(family_transformers_model_type='deepseek_v3', model_folder=None,\n"
        "    config_data=docs.config.data, repo=None, revision=None)\n"
        "assert coverage(locate_sources(docs.graph, docs.config, source)).located > 0\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in {'torch', 'transformers'}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert completed.stdout.strip() == "[]"


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
