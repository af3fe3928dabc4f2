"""Verification legs as plain data, and the verdict over them.

A check is a list of legs. Each leg is one witness of the graph's numbers — the analytic graph itself, transformers'
model built on the meta device, the checkpoint's headers, the shape trace, torch's FLOP counter, transformers' cache
object — and says whether it ran, was skipped (and why) or failed (and how), what it compared, what it found, and
which other legs it does not share code or data with. A leg that agrees only with a leg it is not independent of
witnesses nothing: the verdict is ``agree`` only when a leg independent of the analytic graph ran and everything that
ran agrees.

Adding a witness is adding a function that returns a ``Leg``; the verdict, the reports (terminal, JSON, JUnit) and
the site's sentence read legs generically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from archviz.common.words import counted

ANALYTIC = "analytic graph"
"""The graph built from the config: the thing being verified."""
META = "meta model"
"""transformers' class built on the meta device, compared tensor by tensor."""
CHECKPOINT = "checkpoint"
"""The checkpoint's safetensors headers (or a manifest of them)."""
SHAPES = "shape trace"
"""A prefill and a decode forward pass on meta tensors, compared node by node."""
FLOPS = "FLOP count"
"""torch's ``FlopCounterMode`` over a prefill and a decode step on meta tensors, compared node by node."""
CACHE = "cache object"
"""The tensors transformers' cache object holds after the decode step, compared layer by layer."""
FORWARD_LEGS = (SHAPES, FLOPS, CACHE)
"""The legs that run the meta model's forward: skipped whenever the meta model is, for the same reason."""


class LegStatus(StrEnum):
    """Whether a leg ran."""

    RAN = "ran"
    SKIPPED = "skipped"
    FAILED = "failed"


class Outcome(StrEnum):
    """The verdict of a whole check."""

    AGREE = "agree"
    """A leg independent of the analytic graph ran, and everything that ran agrees."""
    DISAGREE = "disagree"
    """A leg found a disagreement or failed."""
    UNVERIFIED = "unverified"
    """Nothing independent of the analytic graph ran: there was nothing to agree or disagree with."""
    PARTIAL = "partial"
    """Everything that ran agrees, but on the modelled part only: the config has parts the graph (and so every total
    it states) leaves out, so nothing is said about the whole model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing a leg found wrong, or (``strict_only``) could not check."""

    leg: str
    """The leg that found it."""
    subject: str
    """What it is about: a checkpoint tensor name, a node id, a module path; empty for the leg as a whole."""
    message: str
    """One sentence."""
    strict_only: bool = False
    """A gap rather than a disagreement (a state whose shape could not be checked, MTP layers a checkpoint does not
    carry): it fails the check only under ``--strict``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Leg:
    """One witness of a check."""

    name: str
    """Which leg (``meta model``)."""
    witness: str
    """What stands behind it, in a phrase (``transformers' DeepseekV3ForCausalLM built on the meta device``)."""
    status: LegStatus
    """Ran, skipped or failed."""
    reason: str = ""
    """Why it was skipped, or how it failed (the module and the error)."""
    compared: Mapping[str, int] = field(default_factory=dict)
    """What it compared, counted (``{"tensors": 1289, "nodes": 41}``)."""
    findings: tuple[Finding, ...] = ()
    """What it found wrong, or could not check."""
    independent_of: tuple[str, ...] = ()
    """The legs it shares no code or data with: agreeing with them is evidence."""
    internal_error: bool = False
    """It failed because of a bug in archviz, not because of the model."""

    def compared_text(self) -> str:
        """What it compared, in words: ``69,975 tensors, 1 layer traced``."""
        return ", ".join(counted(count, what) for what, count in self.compared.items())

    def fails(self, *, strict: bool = False) -> bool:
        """Whether the leg failed or found a disagreement (under ``strict``, also a gap)."""
        return self.status is LegStatus.FAILED or any(strict or not item.strict_only for item in self.findings)


def outcome(legs: Iterable[Leg], *, strict: bool = False, omitted: Sequence[str] = ()) -> Outcome:
    """The verdict: ``disagree`` if any leg fails, else, when a leg independent of the analytic graph ran, ``agree`` —
    or ``partial`` when the graph leaves parts of the config out (``omitted``) — else ``unverified``."""
    legs = tuple(legs)
    if any(leg.fails(strict=strict) for leg in legs):
        return Outcome.DISAGREE
    if any(leg.status is LegStatus.RAN and ANALYTIC in leg.independent_of for leg in legs):
        return Outcome.PARTIAL if omitted else Outcome.AGREE
    return Outcome.UNVERIFIED


def independent_legs(legs: Iterable[Leg]) -> tuple[Leg, ...]:
    """The legs that ran and are independent of the analytic graph."""
    return tuple(leg for leg in legs if leg.status is LegStatus.RAN and ANALYTIC in leg.independent_of)


def skipped(name: str, witness: str, reason: str, *, independent_of: tuple[str, ...] = ()) -> Leg:
    """A leg that did not run, and why."""
    return Leg(name=name, witness=witness, status=LegStatus.SKIPPED, reason=reason, independent_of=independent_of)
