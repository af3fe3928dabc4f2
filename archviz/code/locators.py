"""How to find a node in modeling code: plain data that graph builders attach to the nodes they build.

A ``Locator`` says which code defines and uses a node (``self.embed_tokens`` in the model class's ``__init__``
and ``forward``) and what those lines show, in one sentence. The family builders emit one with every node and
group (``GraphBuilder.node(..., locate=...)``), naming classes by the patterns of their family's modeling files
(``archviz.families.blocks.code.DecoderCode``); the provenance stage (``archviz.provenance.sources``) runs them on the
file it cites, through the AST locators of ``archviz.code.finder``. Line numbers are never stored here: they are an
output, computed from the file at its pinned revision.

A family's code comes in two kinds of file, transformers' port and the model's own remote code (DeepSeek's
``modeling_deepseek.py``), which write the same model differently. Each site says which of them it is written for
(``Site.origins``): a site targets a file whose origin it names, must find its code there (the tests hold every site to
every file it targets), and is recorded as missed when it does not (``GraphSources.missed``).

Nothing here reads a file; this module imports nothing of archviz.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """What a cited range of lines does for a node."""

    DEFINITION = "definition"
    """Builds it: ``self.embed_tokens = nn.Embedding(…)``, a function or method body."""
    USE = "use"
    """Runs it: ``inputs_embeds = self.embed_tokens(input_ids)``."""
    CONFIG = "config"
    """Sets its numbers: the config.json lines of a key it uses."""


class Category(StrEnum):
    """The tag shown beside a piece of evidence."""

    EMBEDDING = "embedding"
    CONFIG = "config"
    TRANSFORMER = "transformer"
    BLOCK = "block"
    ATTENTION = "attention"
    LINEAR_ATTENTION = "linear-attention"
    ROPE = "rope"
    NORM = "norm"
    MLP = "mlp"
    MOE = "moe"
    HEAD = "head"
    MTP = "mtp"
    VISION = "vision"


class SourceOrigin(StrEnum):
    """Whose modeling file is cited; also which files a locator site is written for."""

    REMOTE = "remote"
    """The model's own code, named by its config's ``auto_map`` (``modeling_deepseek.py``)."""
    TRANSFORMERS = "transformers"
    """The file the installed transformers ships for the family (``modeling_deepseek_v3.py``)."""


EVERY_ORIGIN: tuple[SourceOrigin, ...] = (SourceOrigin.REMOTE, SourceOrigin.TRANSFORMERS)
"""What a site targets unless it says otherwise: code both kinds of file have."""


class SiteKind(StrEnum):
    """What a locator site looks for."""

    ATTRIBUTE = "attribute"
    """``self.<name>``: its assignment (a definition site) or its calls (a use site) in a method."""
    STATEMENT = "statement"
    """The innermost statement of a method whose text contains one of the needles."""
    FUNCTION = "function"
    """A module-level function, by name."""
    METHOD = "method"
    """A method of the class, by name (inherited from a same-file base when the class lacks it)."""
    CLASS = "class"
    """The whole class."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Site:
    """One thing to find in a modeling file for a node, in the files it targets (``origins``)."""

    kind: SiteKind
    """What to look for."""
    role: Role
    """Whether the lines define or use the node (never ``config``)."""
    classes: tuple[str, ...] = ()
    """Class-name suffix patterns, tried in order (``("TopkRouter", "MoEGate")``); empty for a function."""
    method: str | None = None
    """The method searched: ``__init__`` for attribute definitions and ``forward`` for uses unless set."""
    needles: tuple[str, ...] = ()
    """The attribute (one), statement substrings, or function or method names; alternatives are tried in
    order and the first that is found is cited."""
    occurrence: int = 1
    """For statements: which match in source order (2 is the block's second ``residual + hidden_states``)."""
    every: bool = False
    """For attribute uses: cite every statement that calls it, not only the first."""
    with_context: bool = True
    """For uses: also cite the enclosing ``if`` header and the comment lines right above."""
    origins: tuple[SourceOrigin, ...] = EVERY_ORIGIN
    """The kinds of file the site is written for: it must find its code in each, and cannot exist in the others
    (``ALL_ATTENTION_FUNCTIONS`` is transformers' port's, ``logits = logits.float()`` the remote code's). Every file
    is searched, so a remote file that copies transformers' port is still cited; only a targeted file's miss is one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Locator:
    """How to find one node (or group) in a family's modeling code, and what the found lines show."""

    claim: str
    """What the found lines show, in one sentence; true of transformers' port and of the remote code."""
    category: Category
    """The evidence tag."""
    sites: tuple[Site, ...]
    """What to look for; the node is located when any site is found. Empty for code no file has; a file that no
    site targets has none of the node's code (``absent`` says why)."""
    absent: str | None = None
    """Why the code may legitimately be missing from a file, shown when nothing is found."""
    context: tuple[str, ...] = ()
    """Further node or group ids whose evidence is contextual here (the block for the embedded state)."""
    composed: str | None = None
    """For the model and block groups: the claim is composed from the config and the graph when the code is
    found (``model``, ``block``); ``claim`` is what holds without them."""
    file: str | None = None
    """Which of the model's modeling files has the code: None for the graph's own (``modeling_kimi_k25.py``), else the
    name of a part of the model whose code is in a file of its own (``text``: a wrapper's language model, in
    ``modeling_deepseek_v3.py``; see ``FamilyBuilds.code_parts``)."""


# -- the sites, spelled the way the tables read ------------------------------------------------------


def defined(classes: tuple[str, ...], attribute: str, *, method: str = "__init__") -> Site:
    """Where ``self.<attribute>`` is assigned (in ``__init__`` unless ``method`` says otherwise)."""
    return Site(kind=SiteKind.ATTRIBUTE, role=Role.DEFINITION, classes=classes, method=method, needles=(attribute,))


def used(classes: tuple[str, ...], attribute: str, *, method: str = "forward", every: bool = False) -> Site:
    """Where ``self.<attribute>(…)`` is first called in ``forward`` (every call with ``every``)."""
    return Site(
        kind=SiteKind.ATTRIBUTE, role=Role.USE, classes=classes, method=method, needles=(attribute,), every=every
    )


def attribute(classes: tuple[str, ...], name: str) -> tuple[Site, Site]:
    """Where ``self.<name>`` is built in ``__init__`` and first called in ``forward``."""
    return defined(classes, name), used(classes, name)


def statement(
    classes: tuple[str, ...],
    *contains: str,
    method: str = "forward",
    occurrence: int = 1,
    role: Role = Role.USE,
) -> Site:
    """The innermost statement of ``method`` containing one of ``contains`` (the ``occurrence``-th)."""
    return Site(
        kind=SiteKind.STATEMENT, role=role, classes=classes, method=method, needles=contains, occurrence=occurrence
    )


def function(*names: str) -> Site:
    """A module-level function, the first of ``names`` the file defines."""
    return Site(kind=SiteKind.FUNCTION, role=Role.DEFINITION, needles=names)


def method(classes: tuple[str, ...], *names: str) -> Site:
    """A method of the class, the first of ``names`` it has."""
    return Site(kind=SiteKind.METHOD, role=Role.DEFINITION, classes=classes, needles=names)


def whole_class(classes: tuple[str, ...]) -> Site:
    """The whole class definition."""
    return Site(kind=SiteKind.CLASS, role=Role.DEFINITION, classes=classes)


def only(origin: SourceOrigin, *sites: Site) -> tuple[Site, ...]:
    """The sites, targeting only files of ``origin`` (of those they already target); a site left targeting no file
    is dropped: it cannot exist in any file the family has."""
    narrowed = (dataclasses.replace(site, origins=tuple(o for o in site.origins if o is origin)) for site in sites)
    return tuple(site for site in narrowed if site.origins)


def remote_only(*sites: Site) -> tuple[Site, ...]:
    """The sites as only a model's own remote code writes them (DeepSeek's ``logits = logits.float()``)."""
    return only(SourceOrigin.REMOTE, *sites)


def transformers_only(*sites: Site) -> tuple[Site, ...]:
    """The sites as only transformers' port writes them (``ALL_ATTENTION_FUNCTIONS.get_interface(``)."""
    return only(SourceOrigin.TRANSFORMERS, *sites)
