"""Where every node of a graph lives: the modeling lines that define and use it, and its config lines.

This is the provenance stage. ``choose_source_file`` (``archviz.provenance.modeling_file``) picks the modeling file to
cite: the model's own remote code (the ``modeling_*.py`` its config's ``auto_map`` names) when the model folder holds
it, else the file the installed transformers ships for the family. ``locate_sources`` then runs, for every node and
group, the locator its family's builder attached to it (``Node.locate``; the generic family makes its locators per
graph and file) through the AST locators of ``archviz.code.finder``, finds the config.json lines of every key the node
uses, and turns both into citations (``SourceRef``) and evidence (``Evidence``, both in
``archviz.provenance.evidence``) — the one evidence model the site shows. The sentences that
compose a claim from the config are in ``archviz.provenance.claims``. Line numbers are never stored, only computed from
the file at its pinned revision. A node whose code the file does not have is reported as not located, with the reason.

Nothing here imports, compiles or runs a modeling file: they are read as text and parsed with ``ast``. This module
must not import torch or transformers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from archviz.code.finder import SiteMatch, find_site
from archviz.code.locators import Locator, Site, SourceOrigin
from archviz.code.pins import SourceFile
from archviz.code.syntax import SourceSpan, ensure_python
from archviz.common.errors import InputError
from archviz.families.registry import Family
from archviz.graph.nodes import Graph, GroupKind, Node, NodeKind
from archviz.inputs.config import ConfigDocument
from archviz.provenance.evidence import (
    Evidence,
    FileSummary,
    SourceRef,
    _code_evidence,
    _code_refs,
    _config_refs,
    _configuration_evidence,
    _Context,
    _file_summary,
    _group_claim,
    _key_evidence,
    _pins,
)

MODEL_GROUP_TITLE = "Transformer blocks"
"""What the model group is called where people read it (its own title is the config's architecture class)."""
MTP_PREFIX = "mtp."
"""Node and group ids of the multi-token-prediction layers start with this; the rest is a main-model id."""


# ---------------------------------------------------------------------------------------------------
# Results: plain data


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
# Locating a whole graph


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """What one locator found in the file."""

    matches: tuple[SiteMatch, ...]
    problems: tuple[str, ...]
    missed: tuple[Site, ...]
    """The sites that target the file's kind and found nothing (a site that does not target it may find nothing)."""


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
