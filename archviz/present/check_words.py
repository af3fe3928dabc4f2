"""The verification in words: the sentence the site's pages, the notebook and the ``check --json`` document give for
a model's verdict and the witnesses behind it (the ``check`` command's terminal report is
``archviz.present.report``'s)."""

from __future__ import annotations

from archviz.verify import legs
from archviz.verify.check import Verification
from archviz.verify.legs import LegStatus, Outcome


def verification_sentence(verification: Verification | None) -> str:
    """The site's sentence about verification: the verdict and the legs behind it."""
    if verification is None:
        return "Derived from the configuration; not verified against the modeling code or a checkpoint here."
    result = verification.outcome()
    prefix = "Read off transformers' modeling code. " if verification.derived_from_code else ""
    if result is Outcome.DISAGREE:
        return prefix + "Verification found disagreements: " + " ".join(verification.problems[:3])
    if result is Outcome.PARTIAL:
        witnesses = " and ".join(leg.witness for leg in legs.independent_legs(verification.legs))
        return prefix + (
            f"Verified only in part: the graph leaves out {', '.join(verification.omitted)}, so its totals are of the "
            f"modelled part, which agrees with {witnesses}."
        )
    if result is Outcome.UNVERIFIED:
        # The first clause of each reason: the rest is advice for the command line.
        why = "; ".join(
            f"{leg.name} skipped: {leg.reason.split(':')[0]}"
            if leg.status is LegStatus.SKIPPED
            else f"the {leg.name} shares the graph's source"
            for leg in verification.legs
            if leg.name != legs.ANALYTIC and not (leg.name in legs.FORWARD_LEGS and leg.status is LegStatus.SKIPPED)
        )
        return prefix + f"Unverified: no witness independent of the graph ran ({why})."
    witnesses = "; ".join(f"{leg.witness} ({leg.compared_text()})" for leg in legs.independent_legs(verification.legs))
    text = prefix + f"Verified against {witnesses}."
    if verification.checkpoint is None:
        text += " No checkpoint was checked."
        if verification.derived_from_code:
            text += " The parameter counts are read off the same build, so only a checkpoint can witness them."
    return text
