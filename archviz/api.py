"""archviz's Python API: ``describe`` a model, then read its graph, totals, costs, provenance, verdict and changes.

Every result is a frozen object over the pipeline's own data, and shows itself in a notebook the way the site shows
it (the overview's headline figures and diagram, a node's card, the cost section, the compare page), self-contained:
an inline style, no script, nothing loaded from elsewhere. Each also reads as plain text and Markdown.

Importing archviz imports neither torch nor transformers; only ``Model.check``'s meta-model legs do, when they run.
Bad input (an unknown model, a node the graph lacks) raises ``InputError`` with a one-line message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from archviz.common.advice import PYTHON_API
from archviz.common.errors import InputError
from archviz.cost import MAX_BATCH, MAX_POSITIONS
from archviz.cost.cache import cache_dtype_name
from archviz.cost.report import CostReport, model_cost
from archviz.cost.terms import DEFAULT_SIZES, Sizes
from archviz.graph.nodes import Assumption, Graph
from archviz.graph.nodes import Node as GraphNode
from archviz.graph.totals import Totals
from archviz.inputs.config import ConfigDocument
from archviz.pipeline import ModelDocs, describe_model
from archviz.present.jsontext import inert
from archviz.provenance.modeling_file import PREFERENCES
from archviz.provenance.sources import GraphSources
from archviz.verify.legs import Leg, Outcome

if TYPE_CHECKING:
    from archviz.diff.records import ModelDiff
    from archviz.site.compare import CompareView
    from archviz.site.index import ModelIndex
    from archviz.site.notebook import ModelFragment, VerdictFragment
    from archviz.site.overview_views import CostView
    from archviz.site.views import CardView
    from archviz.verify.check import Verification

__all__ = ["Cost", "Diff", "InputError", "Model", "ModelNode", "Verdict", "describe"]

_Bundle = dict[str, str]
"""A Jupyter MIME bundle: ``text/html``, ``text/markdown`` and ``text/plain``."""


def _render(kind: str, view: object, name: str = "", *, namespace: str) -> str:
    """One notebook fragment through the bundled templates, its ids under ``namespace`` (the output's models and
    node: two outputs of one notebook never share an id)."""
    from archviz.site.notebook import render_fragment
    from archviz.site.render import render_context

    return render_fragment(kind, view, render_context(), name, namespace=f"archviz-{kind}-{namespace}")


class _Shown:
    """What every result shares: the three notebook representations from one HTML, Markdown and text view."""

    def _repr_html_(self) -> str:
        return self._html()

    def _repr_markdown_(self) -> str:
        return self._markdown()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> _Bundle:
        return {"text/html": self._html(), "text/markdown": self._markdown(), "text/plain": str(self)}

    def __str__(self) -> str:
        # The text reaches a terminal: a config's `architectures` or a tensor name may hold an ESC or OSC sequence,
        # written as its escape here as the command line's consoles write it.
        return inert(self._text())

    def _html(self) -> str:
        raise NotImplementedError

    def _markdown(self) -> str:
        raise NotImplementedError

    def _text(self) -> str:
        raise NotImplementedError


def describe(
    model: str | os.PathLike[str],
    revision: str | None = None,
    *,
    assume: Mapping[str, object] | None = None,
    partial: bool = False,
    source: str = "auto",
) -> Model:
    """A model's documentation, as ``archviz inspect`` reads it: resolved, its config read, its graph built.

    ``model`` is a bundled model's name (``kimi-k2-instruct``), a folder holding config.json, a config.json, or a
    Hub repo id (``revision``: its branch, tag or commit). ``assume`` supplies values the config lacks (shown as
    assumptions); ``partial`` builds what an incomplete config allows; ``source`` picks the modeling file to cite
    (``auto``, ``remote`` or ``transformers``). Raises ``InputError`` for anything wrong with the input.
    """
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    _argument("model", model, str)
    _argument("revision", revision, str | None)
    _argument("assume", assume, Mapping | None)
    _argument("partial", partial, bool)
    _argument("source", source, str)
    if source not in PREFERENCES:
        raise InputError(f"source must be one of {', '.join(PREFERENCES)}", path=f"source={source!r}")
    for key in assume or {}:
        _argument("a key of assume", key, str)
    assumptions = [
        Assumption(key=key, value=_json_value(key, value), source="assume= in archviz.describe")
        for key, value in (assume or {}).items()
    ]
    docs = describe_model(model, revision=revision, assumptions=assumptions, partial=partial, source=source)
    return Model(name=model, revision=revision, docs=docs)


def _argument(name: str, value: object, kind: Any) -> None:
    """``InputError`` when an argument is not of its type (``partial="no"`` would be true; a number as ``revision``
    an ``AttributeError`` deep inside)."""
    if isinstance(value, bool) and kind in (int, int | None):
        raise InputError(f"must be {_KINDS[kind]}, not a bool", path=name)
    if not isinstance(value, kind):
        raise InputError(f"must be {_KINDS[kind]}, not {type(value).__name__}", path=name)


_KINDS: dict[Any, str] = {
    str: "a str",
    str | None: "a str or None",
    bool: "a bool (True or False)",
    Mapping | None: "a mapping of keys to values, or None",
    int: "an int",
    int | None: "an int or None",
}


def _json_value(key: str, value: object) -> str:
    """An assumed value as the JSON text the graph records; a value JSON cannot hold is the caller's error."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InputError(f"the assumed value is not JSON: {error}", path=f"assume[{key!r}]") from None


@dataclass(frozen=True, eq=False, kw_only=True)
class Model(_Shown):
    """One model's documentation. In a notebook: the overview's headline figures and data-flow diagram."""

    name: str
    """The model as named to ``describe``."""
    revision: str | None
    """The revision asked for (a Hub repo's branch, tag or commit), or None."""
    docs: ModelDocs = field(repr=False)
    """The pipeline's output, for code that goes beyond this API (not stable)."""

    @property
    def graph(self) -> Graph:
        """The typed graph: every operator and tensor state, with shapes and parameter rows."""
        return self.docs.graph

    @property
    def totals(self) -> Totals:
        """The parameter arithmetic: parameters, active per token, buffers, by dtype, MTP."""
        return self.docs.totals

    @property
    def config(self) -> ConfigDocument:
        """The config, with the line span of every key."""
        return self.docs.config

    @property
    def provenance(self) -> GraphSources:
        """Where each node lives in the modeling code and the config, at a pinned revision (located when first
        read)."""
        return self.docs.sources

    @property
    def nodes(self) -> tuple[ModelNode, ...]:
        """Every node, in forward order."""
        return tuple(ModelNode(model=self, node=node) for node in self.graph.nodes)

    def node(self, node_id: str) -> ModelNode:
        """One node by its id (``attention.q-a-proj``); ``InputError`` when the graph has none of that id."""
        for node in self.graph.nodes:
            if node.id == node_id:
                return ModelNode(model=self, node=node)
        raise InputError(f"no node {node_id!r} in the graph (Model.nodes lists them)", path=self.name)

    def cost(
        self,
        *,
        prompt: int = DEFAULT_SIZES.prompt,
        context: int = DEFAULT_SIZES.context,
        batch: int = DEFAULT_SIZES.batch,
        cache_dtype: str | None = None,
    ) -> Cost:
        """What the model costs at these sizes, as ``archviz cost`` computes it: FLOPs of a prefill of ``prompt``
        tokens and of a token decoded with ``context`` cached, weight bytes, cache and state bytes."""
        for what, value, least, most in (
            ("prompt", prompt, 1, MAX_POSITIONS),
            ("context", context, 0, MAX_POSITIONS),
            ("batch", batch, 1, MAX_BATCH),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
                shown = (
                    repr(value)[:40] if not isinstance(value, int) or value.bit_length() < 100 else "a longer number"
                )
                raise InputError(f"{what} must be an integer from {least} to {most:,}", path=f"{what}={shown}")
        _argument("cache_dtype", cache_dtype, str | None)
        dtype = cache_dtype_name(cache_dtype) if cache_dtype is not None else None
        sizes = Sizes(batch=batch, prompt=prompt, context=context)
        report = model_cost(self.graph, self.totals, sizes, cache_dtype=dtype)
        return Cost(model=self, report=report, cache_dtype=dtype)

    def check(
        self,
        *,
        checkpoint: str | os.PathLike[str] | None = None,
        meta: bool = True,
        trust_remote_code: bool = False,
        context: int | None = None,
    ) -> Verdict:
        """Verify the graph leg by leg, as ``archviz check`` does: the meta-device model (imports torch and
        transformers; ``meta=False`` skips it), the shape trace, the FLOP count and the cache object (at small sizes,
        past the model's longest window, chunk or threshold, and at ``context`` cached positions when given), and
        the checkpoint (``checkpoint``, else the Hub repo's or the model folder's, when there is one)."""
        from archviz.verify.check import verify
        from archviz.verify.checkpoint import read_checkpoint
        from archviz.verify.costcheck import witness_context
        from archviz.verify.predicted import checkpoint_location

        if isinstance(checkpoint, os.PathLike):
            checkpoint = os.fspath(checkpoint)
        _argument("checkpoint", checkpoint, str | None)
        _argument("meta", meta, bool)
        _argument("trust_remote_code", trust_remote_code, bool)
        witness_context(context, path="context")
        location = checkpoint_location(self.docs, checkpoint)
        held = read_checkpoint(location, revision=self.revision) if location is not None else None
        verification = verify(
            self.docs,
            checkpoint=held,
            run_meta=meta,
            trust_remote_code=trust_remote_code,
            context=context,
            advice=PYTHON_API,
        )
        self.__dict__["_verification"] = verification  # the overview and the cards show what it found from now on
        return Verdict(model=self, verification=verification)

    def diff(self, other: Model | str | os.PathLike[str], *, revision: str | None = None) -> Diff:
        """What changes from this model to ``other`` (a ``Model``, or a name ``describe`` reads at ``revision``), as
        ``archviz diff`` reads it: config keys, nodes, layer map, totals, in words."""
        from archviz.diff.compare import diff_models

        if isinstance(other, os.PathLike):
            other = os.fspath(other)
        if not isinstance(other, Model):
            _argument("other", other, str)
        _argument("revision", revision, str | None)
        theirs = other if isinstance(other, Model) else describe(other, revision)
        return Diff(a=self, b=theirs, diff=diff_models(self.docs, theirs.docs))

    def json(self) -> dict[str, Any]:
        """The ``archviz inspect --json`` document: every node with its shapes, parameter rows and provenance, the
        totals, and the cost at the default sizes (plain data: dicts, lists, strings, numbers)."""
        from archviz.present.documents import inspect_document

        return inspect_document(self.docs)

    def _shown(self) -> tuple[ModelIndex, ModelFragment]:
        """The site's lookups over the model and its overview as of its latest ``check`` (before one: derived, not
        verified), made again only when a check has run since."""
        from archviz.site.notebook import model_fragment, model_index

        verification = self.__dict__.get("_verification")
        made = self.__dict__.get("_made")
        if made is None or made[0] is not verification:
            index = model_index(self.docs, verification=verification)
            made = (verification, index, model_fragment(index, verification))
            self.__dict__["_made"] = made  # a frozen dataclass: its views are kept beside its fields
        return made[1], made[2]

    @property
    def _index(self) -> ModelIndex:
        return self._shown()[0]

    @property
    def _view(self) -> ModelFragment:
        return self._shown()[1]

    def _html(self) -> str:
        return _render("model", self._view, namespace=self.name)

    def _markdown(self) -> str:
        from archviz.site.notebook import model_markdown

        return model_markdown(self._view)

    def _text(self) -> str:
        from archviz.site.notebook import model_text

        return model_text(self._view)

    def __repr__(self) -> str:
        return f"<archviz.Model {self.name!r}: {self.totals.parameters:,} parameters>"


@dataclass(frozen=True, eq=False, kw_only=True)
class ModelNode(_Shown):
    """One node of a model's graph. In a notebook: its card (shapes, parameters, settings, code, sources)."""

    model: Model = field(repr=False)
    """The model it belongs to."""
    node: GraphNode
    """The graph's node: kind, shapes, parameter rows, settings, placement."""

    @property
    def id(self) -> str:
        """Its id in the graph (``attention.q-a-proj``)."""
        return self.node.id

    @property
    def title(self) -> str:
        """Its title (``Query down-projection``)."""
        return self.node.title

    def json(self) -> dict[str, Any]:
        """The node as ``archviz inspect --json`` lists it (one entry of ``Model.json()["nodes"]``)."""
        from archviz.present.json_documents import node_json

        docs = self.model.docs
        return node_json(docs.graph, self.node, docs.sources.nodes.get(self.node.id) if docs.sources else None)

    @property
    def _view(self) -> CardView:
        """The card as of the model's latest check (its status chip says what the check found of the node), made
        again only when a check has run since (a notebook asks for the HTML, Markdown and text of one display)."""
        from archviz.site.notebook import card_fragment

        index = self.model._index
        made = self.__dict__.get("_made")
        if made is None or made[0] is not index:
            made = (index, card_fragment(index, self.node.id))
            self.__dict__["_made"] = made
        return made[1]

    def _html(self) -> str:
        return _render("card", self._view, namespace=f"{self.model.name}-{self.node.id}")

    def _markdown(self) -> str:
        from archviz.site.notebook import card_markdown

        return card_markdown(self._view)

    def _text(self) -> str:
        from archviz.site.notebook import card_text

        return card_text(self._view)

    def __repr__(self) -> str:
        return f"<archviz.ModelNode {self.model.name!r} {self.id!r}: {self.title}>"


@dataclass(frozen=True, eq=False, kw_only=True)
class Cost(_Shown):
    """What a model costs at given sizes. In a notebook: the overview's cost figures, weights and FLOPs by part."""

    model: Model = field(repr=False)
    """The model it is of."""
    report: CostReport
    """The cost model's report: FLOPs per pass and part, weight bytes by dtype, cache and state per layer type."""
    cache_dtype: str | None = None
    """The cache's dtype as asked for; None for the model's own."""

    @property
    def sizes(self) -> Sizes:
        """Batch, prompt and context."""
        return self.report.sizes

    def json(self) -> dict[str, Any]:
        """The ``archviz cost --json`` document at these sizes."""
        from archviz.cost.report import beyond_context
        from archviz.present.costs_report import cost_json

        docs = self.model.docs
        beyond = beyond_context(self.sizes, docs.config) if self.report.priced else ()
        return cost_json(self.report, docs.graph, docs.totals, beyond=beyond)

    @cached_property
    def _view(self) -> CostView:
        from archviz.site.notebook import cost_fragment, model_index

        return cost_fragment(model_index(self.model.docs, sizes=self.sizes, cache_dtype=self.cache_dtype))

    def _html(self) -> str:
        return _render("cost", self._view, self.model.name, namespace=self.model.name)

    def _markdown(self) -> str:
        from archviz.site.notebook import cost_markdown

        return cost_markdown(self.model.name, self._view)

    def _text(self) -> str:
        from archviz.site.notebook import cost_text

        return cost_text(self.model.name, self._view)

    def __repr__(self) -> str:
        sizes = self.sizes
        return (
            f"<archviz.Cost {self.model.name!r} B={sizes.batch} T={sizes.prompt} S={sizes.context}: "
            f"{self.report.prefill:,} prefill FLOPs, {self.report.decode:,} decode FLOPs per token>"
        )


@dataclass(frozen=True, eq=False, kw_only=True)
class Verdict(_Shown):
    """What ``check`` found: the verdict and every leg behind it. In a notebook: the verdict and a row per leg."""

    model: Model = field(repr=False)
    """The model checked."""
    verification: Verification = field(repr=False)
    """Everything the legs found, for code that goes beyond this API (not stable)."""

    @property
    def outcome(self) -> Outcome:
        """``agree``, ``partial``, ``disagree`` or ``unverified``."""
        return self.verification.outcome()

    @property
    def legs(self) -> tuple[Leg, ...]:
        """Every leg, ran, skipped or failed, in order."""
        return self.verification.legs

    def json(self, *, strict: bool = False) -> dict[str, Any]:
        """The ``archviz check --json`` document."""
        from archviz.present.json_documents import verification_json

        return verification_json(self.verification, strict=strict)

    @cached_property
    def _view(self) -> VerdictFragment:
        from archviz.site.notebook import verdict_fragment

        return verdict_fragment(self.model.name, self.verification)

    def _html(self) -> str:
        return _render("verdict", self._view, namespace=self.model.name)

    def _markdown(self) -> str:
        from archviz.site.notebook import verdict_markdown

        return verdict_markdown(self._view)

    def _text(self) -> str:
        from archviz.site.notebook import verdict_text

        return verdict_text(self._view)

    def __repr__(self) -> str:
        return f"<archviz.Verdict {self.model.name!r}: {self.outcome.value}>"


@dataclass(frozen=True, eq=False, kw_only=True)
class Diff(_Shown):
    """What changes from model A to model B. In a notebook: the compare page's verdict, summary and tables."""

    a: Model = field(repr=False)
    """The first model."""
    b: Model = field(repr=False)
    """The second, read as the change from A."""
    diff: ModelDiff = field(repr=False)
    """The comparison: config keys, nodes, roles, layer map, totals."""

    @property
    def differs(self) -> bool:
        """Whether the architectures differ (config keys alone do not make them)."""
        return self.diff.differs

    @property
    def summary(self) -> str:
        """The comparison in one paragraph."""
        from archviz.present.diff_words import summarise

        return summarise(self.diff, self.a.docs, self.b.docs)

    def json(self) -> dict[str, Any]:
        """The ``archviz diff --json`` document."""
        from archviz.present.json_documents import diff_json

        return diff_json(self.diff, self.summary)

    @cached_property
    def _view(self) -> CompareView:
        from archviz.site.notebook import diff_fragment

        return diff_fragment(self.a._index, self.b._index)

    def _html(self) -> str:
        return _render("diff", self._view, namespace=f"{self.a.name}-{self.b.name}")

    def _markdown(self) -> str:
        from archviz.site.notebook import diff_markdown

        return diff_markdown(self._view)

    def _text(self) -> str:
        from archviz.site.notebook import diff_text

        return diff_text(self._view)

    def __repr__(self) -> str:
        verdict = "differ" if self.differs else "same architecture"
        return f"<archviz.Diff {self.a.name!r} → {self.b.name!r}: {verdict}>"
