"""Evidence and citations: what a card's Sources section and the JSON ``source`` entries show for the code a locator
found and for the config lines of the keys a node uses (``Evidence``, ``SourceRef``), each file with what pins it
(``FileSummary``), the excerpts bounded so cards stay small, and the group claims composed from the config and the
graph (``archviz.provenance.claims``). ``archviz.provenance.sources`` runs the locators and calls these per node and
group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import quote

from archviz.code.excerpts import ExcerptLines, ExcerptPart, covering_range, excerpt, link
from archviz.code.finder import SiteMatch
from archviz.code.locators import Category, Locator, Role, SourceOrigin
from archviz.code.pins import RevisionKind, SourceFile, content_hash
from archviz.code.syntax import SourceSpan
from archviz.common.words import join
from archviz.families.registry import Family
from archviz.graph.nodes import Graph
from archviz.inputs.config import ConfigDocument
from archviz.present.numbers import config_value_text
from archviz.provenance.claims import block_claim, configuration_claim, model_claim, value_at
from archviz.provenance.modeling_file import TRANSFORMERS_REPO, ModelingSource

MAX_SPAN_LINES = 40
"""An excerpt shows at most this many lines of one span (its head and tail), so cards stay small."""
MAX_EXCERPT_LINES = 80
"""An excerpt shows at most about this many lines in all; longer ones are cut span by span."""


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


class _Pins(NamedTuple):
    modeling: FileSummary
    config: FileSummary
    config_url_template: str | None


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
