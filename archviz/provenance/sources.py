"""Where every node of a graph lives: the modeling lines that define and use it, and its config lines.

This is the provenance stage. ``choose_source_file`` picks the modeling file to cite: the model's own remote code
(the ``modeling_*.py`` its config's ``auto_map`` names) when the model folder holds it, else the file the installed
transformers ships for the family. ``locate_sources`` then runs, for every node and group, the locator its family's
builder attached to it (``Node.locate``; the generic family makes its locators per graph and file) through the AST
locators of ``archviz.code.finder``, finds the config.json lines of every key the node uses, and turns both into
citations (``SourceRef``) and evidence (``Evidence``) — the one evidence model the site shows. The sentences that
compose a claim from the config are in ``archviz.provenance.claims``. Line numbers are never stored, only computed from
the file at its pinned revision. A node whose code the file does not have is reported as not located, with the reason.

Nothing here imports, compiles or runs a modeling file: they are read as text and parsed with ``ast``. This module
must not import torch or transformers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import quote

from archviz.code.excerpts import (
    ExcerptLines,
    ExcerptPart,
    covering_range,
    excerpt,
    link,
)
from archviz.code.finder import SiteMatch, find_site
from archviz.code.locators import Category, Locator, Role, Site, SourceOrigin
from archviz.code.pins import (
    RevisionKind,
    SourceFile,
    content_hash,
    hub_source_file,
    load_source_file,
)
from archviz.code.syntax import SourceSpan, ensure_python
from archviz.common.errors import InputError
from archviz.common.words import join
from archviz.families.registry import Family
from archviz.graph.nodes import Graph, GroupKind, Node, NodeKind
from archviz.inputs.config import ConfigDocument
from archviz.inputs.resolve import within_model_folder
from archviz.present.numbers import config_value_text
from archviz.provenance.claims import block_claim, configuration_claim, model_claim, value_at
from archviz.transformers.package import transformers_source_file

TRANSFORMERS_REPO = "huggingface/transformers"
"""The repository cited for transformers' own modeling files."""
MODEL_GROUP_TITLE = "Transformer blocks"
"""What the model group is called where people read it (its own title is the config's architecture class)."""
MTP_PREFIX = "mtp."
"""Node and group ids of the multi-token-prediction layers start with this; the rest is a main-model id."""
MAX_SPAN_LINES = 40
"""An excerpt shows at most this many lines of one span (its head and tail), so cards stay small."""
MAX_EXCERPT_LINES = 80
"""An excerpt shows at most about this many lines in all; longer ones are cut span by span."""

PREFERENCES: tuple[str, ...] = ("auto", "remote", "transformers")
"""The ``prefer`` values of ``choose_source_file`` (the CLI's ``--source``): the model's own code when there
is one, only the model's own code, or transformers' file."""
# auto_map entries naming the model's modeling module, in the order transformers' Auto classes prefer them.
_AUTO_MAP_KEYS = ("AutoModelForCausalLM", "AutoModel")
_MODULE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_HUB_SHA = re.compile(r"[0-9a-f]{40}")
_HUB_CACHE_REPO = re.compile(r"models--(.+)--(.+)")


# ---------------------------------------------------------------------------------------------------
# Results: plain data


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelingSource(SourceFile):
    """A modeling file chosen for a model: a ``SourceFile`` that also says whose code it is and why."""

    origin: SourceOrigin
    """The model's own remote code or transformers' port."""
    repo: str | None
    """Where the file lives (``moonshotai/Kimi-K2-Instruct``, ``huggingface/transformers``), when known."""
    fallback_reason: str | None = None
    """Why transformers' file stands in although the config names remote code; None when the file is what
    was asked for (the remote code was found, none is named, or transformers' file was requested)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSummary:
    """A cited file and what pins it."""

    path: str
    """Display name (``modeling_deepseek_v3.py``, ``config.json``)."""
    revision: str
    """Commit sha, content hash or ``v<version>``."""
    revision_kind: RevisionKind
    """How the revision was obtained."""
    repo: str | None
    """Repository holding the file, when known."""
    url: str | None
    """Web address of the whole file at the revision; None for a local file."""
    origin: SourceOrigin | None
    """Whose modeling code it is; None for the config."""
    fallback_reason: str | None
    """Why transformers' file stands in for the model's own code, if it does."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRef:
    """One cited range of lines: a JSON ``source`` entry."""

    file: str
    """The file's display name."""
    revision: str
    """The pinned revision."""
    start: int
    """First line, 1-based."""
    end: int
    """Last line, inclusive."""
    role: Role
    """Whether the lines define or use the node, or set its numbers in the config."""
    url: str | None
    """Web address of the lines at the revision; None for a local file."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """One item of a card's Sources section: a claim and the lines that support it."""

    direct: bool
    """True for the node's own lines; False for context from a related node or an enclosing group."""
    from_node: str | None
    """For context, the id of the node or group it comes from (``token-embedding``, ``block``)."""
    from_title: str | None
    """For context, that node's or group's title (``Token embedding``)."""
    claim: str
    """What the lines show, in one sentence."""
    category: Category
    """The tag (``embedding``, ``config``, ``block`` …)."""
    repo: str | None
    """Repository holding the file, when known."""
    file: str
    """The file's display name."""
    revision: str
    """The pinned revision."""
    url: str | None
    """Web address of the lines from the first to the last cited one; None for a local file."""
    spans: tuple[SourceSpan, ...]
    """The cited ranges, sorted."""
    excerpt: tuple[ExcerptPart, ...]
    """The shown lines with omission markers, bounded by ``MAX_SPAN_LINES`` and ``MAX_EXCERPT_LINES``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSources:
    """Everything cited for one node."""

    located: bool
    """Whether any of its code was found in the modeling file."""
    reason: str | None
    """Why not, when it was not (``source not located: …``)."""
    refs: tuple[SourceRef, ...]
    """Its definition and use lines, then the config lines of its keys."""
    evidence: tuple[Evidence, ...]
    """Direct evidence first (code, then config), then contextual evidence."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphSources:
    """Provenance of a whole graph."""

    file: FileSummary
    """The modeling file cited."""
    config_file: FileSummary
    """The config cited."""
    configuration: Evidence | None
    """The released configuration in one sentence, with the lines of the keys it mentions."""
    nodes: Mapping[str, NodeSources]
    """By node id, every node of the graph."""
    groups: Mapping[str, tuple[Evidence, ...]]
    """By group id, the evidence of groups whose code was found (the model's forward, the block)."""
    parts: Mapping[str, FileSummary] = dataclasses.field(default_factory=dict)
    """The modeling files of parts of the model whose code is in a file of their own (``text``: a wrapper's language
    model), by part name."""
    missed: Mapping[str, tuple[Site, ...]] = dataclasses.field(default_factory=dict)
    """By node or group id, the locator sites written for the cited file's kind (``Site.origins``) that found nothing
    in it: empty when every targeted site finds its code. Not shown; the tests hold it empty for the released files."""


class Coverage(NamedTuple):
    """How many nodes have located code."""

    located: int
    """Nodes with code found."""
    total: int
    """All nodes."""
    unlocated: tuple[str, ...]
    """Ids of the others, in forward order."""


# ---------------------------------------------------------------------------------------------------
# Choosing the file


def choose_source_file(
    *,
    family_transformers_model_type: str,
    model_folder: Path | None,
    config_data: Mapping[str, Any],
    repo: str | None,
    revision: str | None,
    prefer: str = "auto",
    built_file: str | None = None,
) -> ModelingSource:
    """The modeling file to cite for a model.

    ``auto``: the model's remote code (the module ``auto_map`` names for ``AutoModelForCausalLM``, else
    ``AutoModel``) when ``model_folder`` holds it, else transformers' file for the family with
    ``fallback_reason`` saying why. ``remote``: only the remote code (``InputError`` without it).
    ``transformers``: transformers' file. The remote file is read as text, never imported. Its revision is
    the Hub commit of an HF-cache snapshot folder (``…/snapshots/<sha>/``), else HEAD of a clean git
    checkout holding it, else a content hash. ``revision`` is not trusted to pin a local file; it is
    accepted for symmetry with the rest of the pipeline and used only to say what was asked for.
    ``built_file`` is transformers' file that defines the class the meta stage built (a generic graph's): cited when
    transformers ships no file for the model_type itself (``exaone`` configs built as ``LlamaForCausalLM``).
    """
    if prefer not in PREFERENCES:
        raise ValueError(f"prefer must be one of {', '.join(PREFERENCES)}, got {prefer!r}")
    problem = None
    if prefer != "transformers":
        relative, problem = remote_code_file(config_data)
        if relative is not None:
            found = _remote_source(relative, model_folder=model_folder, repo=repo)
            if found is not None:
                return found
            named = f"the config's auto_map names {relative}" + (f" (revision {revision})" if revision else "")
            if model_folder is None:
                problem = f"{named}, but there is no model folder to read it from (a bundled config)"
            else:
                problem = f"{named}, which is not in the model folder {model_folder}"
    if prefer == "remote":
        said = problem or "the config's auto_map names no modeling module for AutoModelForCausalLM or AutoModel"
        raise InputError(f"no remote modeling code to read: {said}", path=str(model_folder or repo or "config.json"))
    try:
        return _transformers_source(family_transformers_model_type, fallback_reason=problem)
    except InputError as missing:
        defining = built_file.removeprefix("modeling_").removesuffix(".py") if built_file else None
        if defining and defining != family_transformers_model_type:
            reason = f"{missing.message}; the class transformers built is defined in {built_file}"
            with contextlib.suppress(InputError):  # not a model_type's file after all: nothing cited, as below
                return _transformers_source(defining, fallback_reason=f"{problem}; {reason}" if problem else reason)
        # No file to cite is a gap in the provenance, not bad input: every node says "source not located" and why.
        empty = SourceFile(
            path=missing.location.path,
            text="",
            revision="not located",
            revision_kind=RevisionKind.PACKAGE_VERSION,
            url_template=None,
        )
        reason = f"{missing.message}; no code is cited" + (f" ({problem})" if problem else "")
        return _with_origin(empty, SourceOrigin.TRANSFORMERS, repo=TRANSFORMERS_REPO, fallback_reason=reason)


def remote_code_file(config_data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The modeling file the config's ``auto_map`` names (``modeling_deepseek.py``), relative to the model
    folder, or None and why the entry cannot be used (None, None when there is no entry)."""
    for document in (config_data, config_data.get("text_config")):
        auto_map = document.get("auto_map") if isinstance(document, Mapping) else None
        if not isinstance(auto_map, Mapping):
            continue
        for key in _AUTO_MAP_KEYS:
            if key in auto_map:
                return _module_file(key, auto_map[key])
    return None, None


def _module_file(key: str, value: object) -> tuple[str | None, str | None]:
    entry = value[0] if isinstance(value, list) and value else value
    if not isinstance(entry, str):
        return None, f"the config's auto_map entry {key} is not a string"
    if "--" in entry:
        other, _, _ = entry.partition("--")
        return None, f"the config's auto_map entry {key} names code in another repository ({other}), which is not read"
    module, dot, _ = entry.rpartition(".")
    if not dot or _MODULE_PATH.fullmatch(module) is None:
        return None, f"the config's auto_map entry {key} ({entry!r}) does not name a module"
    return module.replace(".", "/") + ".py", None


def _remote_source(relative: str, *, model_folder: Path | None, repo: str | None) -> ModelingSource | None:
    if model_folder is None:
        return None
    path = model_folder / relative
    if not path.is_file() or not within_model_folder(path, model_folder):
        return None  # a link out of the folder is not the model's code: transformers' file stands in
    parts = PurePosixPath(relative).parts
    snapshot = Path(*path.parts[: len(path.parts) - len(parts)])
    if snapshot.parent.name == "snapshots" and _HUB_SHA.fullmatch(snapshot.name):
        cached = _HUB_CACHE_REPO.fullmatch(snapshot.parent.parent.name)
        hub_repo = repo or (f"{cached.group(1)}/{cached.group(2)}" if cached else None)
        if hub_repo is not None:
            pinned = hub_source_file(path, repo_id=hub_repo, revision=snapshot.name, filename=relative)
            return _with_origin(pinned, SourceOrigin.REMOTE, repo=hub_repo, fallback_reason=None)
    return _with_origin(
        load_source_file(path, display_name=relative), SourceOrigin.REMOTE, repo=repo, fallback_reason=None
    )


def _transformers_source(model_type: str, *, fallback_reason: str | None) -> ModelingSource:
    source = transformers_source_file(model_type)
    if fallback_reason is not None:
        fallback_reason = f"{fallback_reason}; transformers' {source.path} ({source.revision}) stands in"
    return _with_origin(source, SourceOrigin.TRANSFORMERS, repo=TRANSFORMERS_REPO, fallback_reason=fallback_reason)


def _with_origin(
    source: SourceFile, origin: SourceOrigin, *, repo: str | None, fallback_reason: str | None
) -> ModelingSource:
    fields = {item.name: getattr(source, item.name) for item in dataclasses.fields(SourceFile)}
    return ModelingSource(**fields, origin=origin, repo=repo, fallback_reason=fallback_reason)


# ---------------------------------------------------------------------------------------------------
# Locating a whole graph


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """What one locator found in the file."""

    matches: tuple[SiteMatch, ...]
    problems: tuple[str, ...]
    missed: tuple[Site, ...]
    """The sites that target the file's kind and found nothing (a site that does not target it may find nothing)."""


class _Pins(NamedTuple):
    modeling: FileSummary
    config: FileSummary
    config_url_template: str | None


def locate_sources(
    graph: Graph,
    config: ConfigDocument,
    source: SourceFile,
    parts: Mapping[str, SourceFile] | None = None,
    *,
    family: Family,
) -> GraphSources:
    """Cite every node of ``graph`` (built by ``family``) in ``source`` (best from ``choose_source_file``) and in
    ``config``; a locator that names a part of the model (``Locator.file``) is run on that part's file in ``parts``.

    Nothing is executed: the file is parsed. A node whose code is not found is not located, with the reason.
    """
    parts = dict(parts or {})
    for file in (source, *parts.values()):
        ensure_python(file)  # a file that is not Python fails here, not as "not located"
    node_locators, group_locators = _locators(graph, source, family)
    pins = _pins(graph, config, source)
    found_cache: dict[Locator, _Found] = {}
    context = _Context(graph=graph, config=config, source=source, pins=pins, parts=parts, family=family)

    def found(locator: Locator) -> _Found:
        if locator not in found_cache:
            file = context.file(locator)
            found_cache[locator] = _find_locator(locator, file, _file_summary(file, graph).origin)
        return found_cache[locator]

    configuration = _configuration_evidence(context)
    groups: dict[str, tuple[Evidence, ...]] = {}
    for group in graph.groups:
        group_locator = group_locators.get(group.id)
        group_matches = () if group_locator is None else found(group_locator).matches
        claim = None if group_locator is None else _group_claim(context, group_locator, group_matches)
        if group_locator is not None and group_matches and claim is not None:
            groups[group.id] = (_code_evidence(context, group_locator, claim, group_matches),)

    own: dict[str, NodeSources] = {}
    for node in graph.nodes:
        locator = node_locators.get(node.id)
        result = None if locator is None else found(locator)
        own[node.id] = _direct_sources(context, node, locator, result)

    titles = {node.id: node.title for node in graph.nodes} | {
        group.id: MODEL_GROUP_TITLE if group.kind is GroupKind.MODEL else group.title for group in graph.groups
    }
    nodes: dict[str, NodeSources] = {}
    for position, node in enumerate(graph.nodes):
        direct = own[node.id].evidence
        contextual: list[Evidence] = []
        for related in _related(graph, position, node_locators.get(node.id), groups):
            supplied = own[related].evidence if related in own else groups.get(related, ())
            for item in supplied:
                if item.direct and not _covered(item, direct) and not any(_same_lines(item, x) for x in contextual):
                    contextual.append(
                        dataclasses.replace(item, direct=False, from_node=related, from_title=titles.get(related))
                    )
        if not contextual:
            contextual = _producer_fallback(graph, position, own)
        nodes[node.id] = dataclasses.replace(own[node.id], evidence=(*direct, *contextual))
    # Every locator was run above (``found`` keeps each result): a targeted site that found nothing is recorded.
    entries = [(group.id, group_locators.get(group.id)) for group in graph.groups]
    entries += [(node.id, node_locators.get(node.id)) for node in graph.nodes]
    missed = {id: found(locator).missed for id, locator in entries if locator is not None and found(locator).missed}
    return GraphSources(
        file=pins.modeling,
        parts=MappingProxyType({name: _file_summary(part, graph) for name, part in parts.items()}),
        config_file=pins.config,
        configuration=configuration,
        nodes=MappingProxyType(nodes),
        groups=MappingProxyType(groups),
        missed=MappingProxyType(missed),
    )


def cited_file(graph: Graph, config: ConfigDocument, source: SourceFile) -> FileSummary:
    """The modeling file ``locate_sources`` would cite (path, revision, origin), without locating anything."""
    return _pins(graph, config, source).modeling


def _locators(graph: Graph, source: SourceFile, family: Family) -> tuple[Mapping[str, Locator], Mapping[str, Locator]]:
    """The locator of every node and group: the ones the family's builder attached, or, for a family whose
    locators depend on the cited file (the generic family's), the ones it makes for this graph and file."""
    if family.builds.locators is not None:
        return family.builds.locators(graph, source)
    nodes = {node.id: node.locate for node in graph.nodes if node.locate is not None}
    groups = {group.id: group.locate for group in graph.groups if group.locate is not None}
    return nodes, groups


def _direct_sources(context: _Context, node: Node, locator: Locator | None, result: _Found | None) -> NodeSources:
    """A node's own citations and direct evidence: its code, then its config lines."""
    evidence: list[Evidence] = []
    refs: list[SourceRef] = []
    if locator is None or result is None:
        reason: str | None = f"source not located: the {context.graph.model.family} family names no code for {node.id}"
    elif result.matches:
        reason = None
        evidence.append(_code_evidence(context, locator, locator.claim, result.matches))
        refs.extend(_code_refs(context.file(locator), result.matches))
    else:
        reason = _not_located(locator, result, context.file(locator))
    # Only the lines of the keys the node's numbers use: the released configuration as a whole is the overview's.
    config_item = _key_evidence(context, node.config_keys)
    if config_item is not None:
        evidence.append(config_item)
    refs.extend(_config_refs(context, node.config_keys))
    return NodeSources(located=reason is None, reason=reason, refs=tuple(refs), evidence=tuple(evidence))


def coverage(sources: GraphSources) -> Coverage:
    """How many nodes are located, of how many, and which are not."""
    unlocated = tuple(id for id, node in sources.nodes.items() if not node.located)
    return Coverage(located=len(sources.nodes) - len(unlocated), total=len(sources.nodes), unlocated=unlocated)


def source_entries(node: NodeSources) -> list[dict[str, Any]]:
    """A node's ``source`` list for the JSON document: ``{file, revision, start, end, role, url}`` each."""
    return [
        {
            "file": ref.file,
            "revision": ref.revision,
            "start": ref.start,
            "end": ref.end,
            "role": ref.role.value,
            "url": ref.url,
        }
        for ref in node.refs
    ]


def _find_locator(locator: Locator, source: SourceFile, origin: SourceOrigin | None) -> _Found:
    """Every site of the locator in ``source`` (whose kind is ``origin``): each is searched, whichever files it
    targets, so a remote file copying transformers' port is cited too; a targeted site that finds nothing is missed."""
    matches: list[SiteMatch] = []
    problems: list[str] = []
    missed: list[Site] = []
    for site in locator.sites:
        try:
            found = find_site(site, source)
        except InputError as error:  # an ambiguous class pattern: say so, keep looking
            problems.append(error.message)
            found = ()
        matches.extend(found)
        if not found and origin in site.origins:
            missed.append(site)
    return _Found(matches=tuple(matches), problems=tuple(dict.fromkeys(problems)), missed=tuple(missed))


def _not_located(locator: Locator, result: _Found, source: SourceFile) -> str:
    if not locator.sites:
        return f"source not located: {locator.absent or 'no modeling file has this code'}"
    said = f"none of its {len(locator.sites)} code sites is in {source.path} ({source.revision})"
    if result.problems:
        said += "; " + "; ".join(result.problems)
    if locator.absent:
        said += ". " + locator.absent
    return f"source not located: {said}"


def _related(
    graph: Graph, position: int, locator: Locator | None, groups: Mapping[str, tuple[Evidence, ...]]
) -> list[str]:
    """Ids whose evidence is context for the node at ``position``: the operator producing a tensor state,
    the innermost enclosing group with evidence, and the locator's own extra ids."""
    node = graph.nodes[position]
    related: list[str] = []
    producer = _producer(graph, position)
    if producer is not None:
        related.append(producer.id)
    by_id = {group.id: group for group in graph.groups}
    current: str | None = node.group
    while current is not None and current in by_id:
        if current in groups:
            related.append(current)
            break
        if by_id[current].kind is GroupKind.MTP:
            break  # the MTP layers are not part of the model's forward: no context beyond them
        current = by_id[current].parent
    if locator is not None:
        # An MTP copy takes its context from the MTP layer's own nodes and groups where they exist.
        known = {item.id for item in graph.nodes} | set(by_id)
        prefix = MTP_PREFIX if node.id.startswith(MTP_PREFIX) else ""
        related.extend(prefix + extra if prefix + extra in known else extra for extra in locator.context)
    return list(dict.fromkeys(related))


def _producer(graph: Graph, position: int) -> Node | None:
    """For a tensor state, the operator right before it that outputs the same tensor."""
    node = graph.nodes[position]
    if node.kind is not NodeKind.TENSOR or position == 0 or not node.outputs:
        return None
    previous = graph.nodes[position - 1]
    if previous.kind is NodeKind.TENSOR:
        return None
    name = node.outputs[0].name
    return previous if any(item.name == name for item in previous.outputs) else None


def _producer_fallback(graph: Graph, position: int, own: Mapping[str, NodeSources]) -> list[Evidence]:
    """Context for a tensor state that got none: its producer's direct evidence, even lines it cites itself.

    When no code of the producer is found, its only lines are the config line the state cites too; the card then
    still names the operator that produced the state (``mid-residual`` of a model whose code is not found).
    """
    producer = _producer(graph, position)  # None unless the node is a tensor state with an output
    if producer is None:
        return []
    state = graph.nodes[position].outputs[0]
    if not any(out.name == state.name and out.dims == state.dims for out in producer.outputs):
        return []
    return [
        dataclasses.replace(item, direct=False, from_node=producer.id, from_title=producer.title)
        for item in own[producer.id].evidence
        if item.direct
    ]


def _covered(item: Evidence, own: Sequence[Evidence]) -> bool:
    """Whether every line ``item`` cites is already cited by the node's own evidence of the same file."""
    lines = _line_set(item.spans)
    cited = set().union(*(_line_set(other.spans) for other in own if other.file == item.file))
    return lines <= cited


def _same_lines(item: Evidence, other: Evidence) -> bool:
    return item.file == other.file and item.spans == other.spans


def _line_set(spans: Sequence[SourceSpan]) -> set[int]:
    return {number for span in spans for number in range(span.start, span.end + 1)}


# ---------------------------------------------------------------------------------------------------
# Evidence and citations


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    graph: Graph
    config: ConfigDocument
    source: SourceFile
    pins: _Pins
    parts: Mapping[str, SourceFile]
    family: Family

    def file(self, locator: Locator) -> SourceFile:
        """The file a locator's code is in: its part's, else the graph's own."""
        return self.parts.get(locator.file, self.source) if locator.file is not None else self.source


def _file_summary(source: SourceFile, graph: Graph) -> FileSummary:
    """A modeling file and what pins it."""
    if isinstance(source, ModelingSource):
        origin, repo, fallback = source.origin, source.repo, source.fallback_reason
    elif source.revision_kind is RevisionKind.PACKAGE_VERSION:
        origin, repo, fallback = SourceOrigin.TRANSFORMERS, TRANSFORMERS_REPO, None
    else:
        origin, repo, fallback = SourceOrigin.REMOTE, graph.model.repo, None
    template = source.url_template
    return FileSummary(
        path=source.path,
        revision=source.revision,
        revision_kind=source.revision_kind,
        repo=repo,
        url=template.split("#", 1)[0] if template else None,
        origin=origin,
        fallback_reason=fallback,
    )


def _pins(graph: Graph, config: ConfigDocument, source: SourceFile) -> _Pins:
    modeling = _file_summary(source, graph)
    name = graph.model.config_path
    if graph.model.revision:
        revision, kind = graph.model.revision, RevisionKind.HUB
    else:
        revision, kind = content_hash(config.text.encode("utf-8")), RevisionKind.CONTENT_HASH
    config_template = None
    if graph.model.repo and graph.model.revision:
        config_template = (
            f"https://huggingface.co/{quote(graph.model.repo, safe='/')}/blob/{quote(graph.model.revision, safe='')}/"
            f"{quote(name, safe='/')}#L{{start}}-L{{end}}"
        )
    config_file = FileSummary(
        path=name,
        revision=revision,
        revision_kind=kind,
        repo=graph.model.repo,
        url=config_template.split("#", 1)[0] if config_template else None,
        origin=None,
        fallback_reason=None,
    )
    return _Pins(modeling=modeling, config=config_file, config_url_template=config_template)


def _code_refs(source: SourceFile, matches: Sequence[SiteMatch]) -> list[SourceRef]:
    refs: dict[tuple[Role, int, int], SourceRef] = {}
    for match in sorted(matches, key=lambda item: (item.site.role is not Role.DEFINITION, item.span.start)):
        key = (match.site.role, match.span.start, match.span.end)
        refs.setdefault(
            key,
            SourceRef(
                file=source.path,
                revision=source.revision,
                start=match.span.start,
                end=match.span.end,
                role=match.site.role,
                url=link(source, match.span),
            ),
        )
    return list(refs.values())


def _code_evidence(context: _Context, locator: Locator, claim: str, matches: Sequence[SiteMatch]) -> Evidence:
    source = context.file(locator)
    category = locator.category
    spans = tuple(sorted({match.span for match in matches}, key=lambda span: (span.start, span.end)))
    start, end = covering_range(spans)
    return Evidence(
        direct=True,
        from_node=None,
        from_title=None,
        claim=claim,
        category=category,
        repo=_file_summary(source, context.graph).repo,
        file=source.path,
        revision=source.revision,
        url=link(source, SourceSpan(path=source.path, start=start, end=end)),
        spans=spans,
        excerpt=bounded_excerpt(source.text, spans),
    )


def bounded_excerpt(text: str, spans: Sequence[SourceSpan]) -> tuple[ExcerptPart, ...]:
    """``provenance.excerpt`` of the spans, cutting long spans harder until about ``MAX_EXCERPT_LINES`` show."""
    parts: list[ExcerptPart] = []
    for limit in (MAX_SPAN_LINES, 20, 12, 6, 2):
        parts = excerpt(text, spans, max_span_lines=limit)
        if sum(len(part.lines) for part in parts if isinstance(part, ExcerptLines)) <= MAX_EXCERPT_LINES:
            break
    return tuple(parts)


def _key_spans(config: ConfigDocument, name: str, keys: Sequence[str]) -> list[tuple[str, SourceSpan]]:
    """The config keys that are set, each with its lines (a dotted key is a nested path under the root)."""
    found: list[tuple[str, SourceSpan]] = []
    for key in dict.fromkeys(keys):
        line_span = config.key_span(key)
        if line_span is not None:
            found.append((key, SourceSpan(path=name, start=line_span.start, end=line_span.end)))
    return found


def _config_refs(context: _Context, keys: Sequence[str]) -> list[SourceRef]:
    pins = context.pins
    return [
        SourceRef(
            file=pins.config.path,
            revision=pins.config.revision,
            start=span.start,
            end=span.end,
            role=Role.CONFIG,
            url=_config_url(pins, span.start, span.end),
        )
        for _, span in _key_spans(context.config, pins.config.path, keys)
    ]


def _config_url(pins: _Pins, start: int, end: int) -> str | None:
    template = pins.config_url_template
    return None if template is None else template.replace("{start}", str(start)).replace("{end}", str(end))


def _config_evidence(context: _Context, claim: str, keys: Sequence[str]) -> Evidence | None:
    config, pins = context.config, context.pins
    found = _key_spans(config, pins.config.path, keys)
    if not found:
        return None
    spans = {span for _, span in found}
    # The sub-configs whose "text_config": { (or "vision_config": {) line is shown above the keys under it.
    parts = {*config.root[:1], *context.family.builds.modelled_configs}
    for key, _ in found:
        path = config.key_path(key)
        parent = config.spans.get(path[:1]) if path is not None and len(path) > 1 and path[0] in parts else None
        if parent is not None:
            spans.add(SourceSpan(path=pins.config.path, start=parent.start, end=parent.start))
    ordered = tuple(sorted(spans, key=lambda span: (span.start, span.end)))
    start, end = covering_range(ordered)
    return Evidence(
        direct=True,
        from_node=None,
        from_title=None,
        claim=claim,
        category=Category.CONFIG,
        repo=pins.config.repo,
        file=pins.config.path,
        revision=pins.config.revision,
        url=_config_url(pins, start, end),
        spans=ordered,
        excerpt=bounded_excerpt(config.text, ordered),
    )


def _key_evidence(context: _Context, keys: Sequence[str]) -> Evidence | None:
    """Config evidence for a node's own keys: ``The configuration sets hidden_size = 7,168 and …``."""
    config = context.config
    found = [key for key, _ in _key_spans(config, context.pins.config.path, keys)]
    if not found:
        return None
    settings = [f"{key} = {config_value_text(value_at(config, key))}" for key in found]
    # A wrapper's node may cite keys beside its text_config (vision_config.patch_size): then it is the whole file's.
    relative = all(config.span(*key.split(".")) is not None for key in found)
    which = "text configuration" if config.root and relative else "configuration"
    return _config_evidence(context, f"The {which} sets {join(settings)}.", found)


# -- composed claims ------------------------------------------------------------------------------------


def _configuration_evidence(context: _Context) -> Evidence | None:
    """The released configuration in one sentence, citing the keys it mentions."""
    claim, keys = configuration_claim(context.graph, context.config, context.family)
    return None if not keys else _config_evidence(context, claim, keys)


def _group_claim(context: _Context, locator: Locator, matches: Sequence[SiteMatch]) -> str | None:
    """The group's claim; the model's and a block's are composed from the config and the graph. None for those
    two when the graph is partial: they would describe blocks and a head the graph does not have."""
    if locator.composed in ("model", "block") and context.graph.partial:
        return None
    if locator.composed == "model":
        upcast = any(match.needle == "logits = logits.float()" for match in matches)
        return model_claim(context.config, upcast=upcast)
    if locator.composed == "block":
        return block_claim(context.graph)
    return locator.claim
