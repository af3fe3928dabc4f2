"""``archviz check --junit-xml``: the check as a JUnit XML report, one test case per leg and per node.

CI systems (GitHub Actions' test reporters, GitLab, Jenkins) show JUnit test cases by name, so a failing node is
named where the build failed: the verdict's case fails on a disagreement and on an unverified check (skipped under
``--allow-unverified``), as the exit code does; a leg's case fails with its findings or its error, and is skipped with
its reason; a part of the config the graph does not model is a skipped case of its own (the verdict is then partial);
a node's case fails when its parameter count, one of its tensors or its shape disagrees, and is skipped when no leg
compared it. A pure function of the verification; the command line writes the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from xml.etree import ElementTree

from archviz.graph.nodes import Graph
from archviz.verify.check import NodeCheck, Verification
from archviz.verify.legs import LegStatus, Outcome
from archviz.verify.reconcile import Verdict
from archviz.verify.shapecheck import NodeShape, ShapeVerdict

# Characters XML 1.0 cannot carry at all (a config or a header may hold any string).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def junit_xml(
    name: str, graph: Graph, verification: Verification, *, strict: bool = False, allow_unverified: bool = False
) -> str:
    """The JUnit XML document for one ``archviz check``: the verdict's case first, then one per leg and node."""
    suite = ElementTree.Element("testsuite", name=_text(f"archviz check {name}"))
    verdict = _case(suite, "archviz.verdict", "outcome")
    result = verification.outcome(strict=strict)
    if result is Outcome.DISAGREE:
        _outcome(verdict, "failure", "disagree: a leg found a difference", "")
    elif result is Outcome.UNVERIFIED:  # as the exit code: 3, or 0 with --allow-unverified (then skipped, not passed)
        said = "unverified: no witness independent of the graph ran"
        _outcome(verdict, "skipped" if allow_unverified else "failure", said, "")
    covered = {*verification.costs.flop_nodes, *verification.costs.cache_nodes}
    for leg in verification.legs:
        case = _case(suite, "archviz.verify.legs", leg.name)
        if leg.status is LegStatus.SKIPPED:
            _outcome(case, "skipped", leg.reason, "")
        elif leg.status is LegStatus.FAILED:
            kind = "error" if leg.internal_error else "failure"
            _outcome(case, kind, leg.reason, "\n".join(item.message for item in leg.findings))
        elif leg.fails(strict=strict):
            messages = [item.message for item in leg.findings if strict or not item.strict_only]
            _outcome(case, "failure", f"{len(messages):,} findings", "\n".join(messages))
    for key in verification.omitted:  # a part of the config the graph leaves out: nothing checked it (partial)
        case = _case(suite, "archviz.not_modelled", key)
        reason = next((item for item in graph.not_modelled if item.startswith(key)), f"{key} is not modelled")
        _outcome(case, "skipped", reason, "")
    counts = {check.node: check for check in verification.nodes}
    shapes = {item.node: item for item in verification.shape_nodes}
    for node in graph.nodes:
        case = _case(suite, "archviz.nodes", f"{node.id} ({node.title})")
        shape = shapes.get(node.id)
        problems = list(_node_problems(node.id, counts.get(node.id), shape, verification))
        if problems:
            _outcome(case, "failure", problems[0], "\n".join(problems))
        elif (
            (node.id not in counts or counts[node.id].verdict is Verdict.NOT_CHECKED)
            and (shape is None or shape.status is ShapeVerdict.NOT_CHECKED)
            and node.id not in covered
        ):
            _outcome(case, "skipped", shape.reason if shape is not None else "no leg checked it", "")
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for kind, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attribute, str(sum(1 for case in cases if case.find(kind) is not None)))
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suite, encoding="unicode") + "\n"


def _node_problems(
    node: str, check: NodeCheck | None, shape: NodeShape | None, verification: Verification
) -> Iterable[str]:
    for tensor in verification.tensors:  # the most specific first: the tensor, then the node's count
        if tensor.node == node:
            said = f"(expected {tensor.expected}, found {tensor.found})"
            yield f"{tensor.leg}: {tensor.name} {tensor.verdict.value} {said}"
    if check is not None and check.verdict is Verdict.MISMATCH:
        counts = {"the meta model": check.meta, "the checkpoint": check.checkpoint}
        held = ", ".join(f"{leg} {count:,}" for leg, count in counts.items() if count is not None)
        yield f"parameters: the graph counts {check.analytic:,}, {held}"
    if shape is not None and shape.status in (ShapeVerdict.MISMATCH, ShapeVerdict.FAILED):
        yield f"shape: {shape.reason}"
        for item in verification.shapes:
            if item.node == node and item.verdict is ShapeVerdict.MISMATCH:
                yield f"{item.phase}: expected {list(item.expected or ())}, found {list(item.found or ())}"


def _case(suite: ElementTree.Element, classname: str, name: str) -> ElementTree.Element:
    return ElementTree.SubElement(suite, "testcase", classname=classname, name=_text(name))


def _outcome(case: ElementTree.Element, kind: str, message: str, details: str) -> None:
    element = ElementTree.SubElement(case, kind, message=_text(message))
    if details:
        element.text = _text(details)


def _text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)
