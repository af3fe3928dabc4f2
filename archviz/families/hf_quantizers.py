"""What transformers' own quantizer integrations share: finding their ``quantization_config`` and matching
``modules_to_not_convert``.

MXFP4 (``archviz.families.mxfp4``), FBGEMM FP8 (``archviz.families.fbgemm``), fine-grained FP8 (``archviz.families.
fp8``) and AWQ (``archviz.families.gptq``) checkpoints are read by transformers' quantizers, which decide the modules
they convert the same way (transformers 5.24): every entry of ``modules_to_not_convert`` (and the class's
``_keep_in_fp32_modules``) is matched against a module's path by ``quantizers_utils.should_convert_module``. Restated
here once, without torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archviz.common.patterns import PatternMatcher, PatternTimeout
from archviz.graph.naming import NamingMap
from archviz.graph.nodes import UNQUANTIZED, Graph, Node, TensorRow
from archviz.inputs.settings import Settings


class NotModelled(Exception):
    """The config quantizes in a way these rules do not cover: said, with the reason, instead of guessed."""


def quantization_config(
    s: Settings, method: str, keys: Sequence[str] = ("quantization_config",)
) -> tuple[Mapping[str, Any], str] | None:
    """The config under one of ``keys`` whose ``quant_method`` is ``method`` (top level first, then the settings'
    level, as transformers' loader looks for it, an assumption for a key the config lacks there included: ``plan
    --weights``) and where it is (``text_config.quantization_config``); None when the config has none."""
    document = s.document
    for path, level in (((), document.data), (document.root, s.values)):
        for key in keys:
            value = level.get(key)
            if isinstance(value, Mapping) and value.get("quant_method") == method:
                return value, ".".join((*path, key))
    return None


BOUNDARY = r"(?:(?<=\.)|(?=\.|$))"
"""Where a ``modules_to_not_convert`` entry may end its match: after a dot it ends with, or before a dot or the end."""

_PLAIN = re.compile(r"[\w.]+")
"""An entry with no operator but ``.``: a module path as written (``model.layers.0.input_layernorm``), whose dots
still match any character, as ``re`` reads them."""


def _trie(entries: Sequence[str]) -> str:
    """One pattern that matches at a position exactly where one of the plain ``entries`` does: the entries share
    their common beginnings (``model\\.layers`` once, not once per entry), so a path is read about once however many
    entries there are. Each character stays the token it was (a dot still matches any character); backtracking is
    bounded by the tree's size, since each branch is a fixed string."""
    end = ""
    tree: dict[str, Any] = {}
    for entry in entries:
        node = tree
        for character in entry:
            node = node.setdefault(character, {})
        node[end] = {}

    def branch(node: dict[str, Any]) -> str:
        options = [character + branch(child) if character else "" for character, child in sorted(node.items())]
        return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"

    return branch(tree)


@dataclass(frozen=True, slots=True)
class ModulePatterns:
    """A config's ``modules_to_not_convert``, matched within one time budget (``archviz.common.patterns``)."""

    entries: tuple[str, ...]
    """Each a regular expression, as the config lists them."""
    matcher: PatternMatcher = field(default_factory=PatternMatcher, compare=False)
    """Matches them all, within the budget."""
    plain: str | None = field(default=None, compare=False)
    """The entries that are module paths as written (``_PLAIN``) as one pattern (``_trie``) followed by ``BOUNDARY``;
    None when there are none. A release may list hundreds (GLM-5-FP8: 712), and each module path is then matched once,
    not once per entry."""
    others: tuple[str, ...] = field(default=(), compare=False)
    """The entries with operators, each matched alone."""

    def __post_init__(self) -> None:
        plain = [key for key in self.entries if _PLAIN.fullmatch(key)]
        if plain:
            object.__setattr__(self, "plain", f"{_trie(plain)}{BOUNDARY}")
        object.__setattr__(self, "others", tuple(key for key in self.entries if not _PLAIN.fullmatch(key)))


def should_convert(path: str, patterns: ModulePatterns | Sequence[str] | None) -> bool:
    """``quantizers_utils.should_convert_module``: False when an entry matches the module path from its start up to a
    module boundary (as a regular expression, ``layers.*`` matching ``layers.11.mlp``), or as a suffix."""
    if patterns is None:
        return True
    if not isinstance(patterns, ModulePatterns):
        patterns = ModulePatterns(tuple(patterns))
    if path.endswith(patterns.entries):
        return False
    matcher = patterns.matcher
    if patterns.plain is not None and matcher.match(patterns.plain, path, shown="modules_to_not_convert"):
        return False
    return not any(matcher.match(rf"(?:{key}){BOUNDARY}", path, shown=key) for key in patterns.others)


def converts(module: str, patterns: ModulePatterns | Sequence[str] | None, naming: NamingMap) -> bool:
    """``should_convert`` as a quantizer decides it for the module a checkpoint names ``module``: on its path in
    transformers' model (``naming``), and on the checkpoint's name, since transformers renames an entry written for
    checkpoint names as its conversion mapping renames them before matching (``FineGrainedFP8HfQuantizer.
    _normalize_modules_to_not_convert``)."""
    if patterns is None:
        return True
    path = naming.module_path(module)
    return should_convert(module, patterns) and (path == module or should_convert(path, patterns))


def not_to_convert(raw: Mapping[str, Any]) -> ModulePatterns | None:
    """The config's ``modules_to_not_convert``, each a regular expression; None when it sets none."""
    listed = raw.get("modules_to_not_convert")
    if listed is None:
        return None
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        raise NotModelled("modules_to_not_convert is not a list of strings")
    for pattern in listed:
        try:
            re.compile(pattern)
        except re.error as error:
            raise NotModelled(
                f"modules_to_not_convert entry {pattern!r} is not a regular expression ({error})"
            ) from None
    return ModulePatterns(tuple(listed))


def fused_bank(row: TensorRow) -> bool:
    """Whether a row is a tensor of a bank of experts that transformers' class holds fused, not as ``nn.Linear``
    modules (a graph read off the code names the bank's class as the row's module, whether the checkpoint stores it
    one tensor per expert or as one ``[E, …]`` tensor): quantizers that convert ``nn.Linear`` modules do not convert
    it, while a checkpoint may store its experts quantized."""
    return row.module not in (None, "Linear", "Embedding") and ".experts." in row.tensor


class NotConverted:
    """``HfQuantizer.get_modules_to_not_convert(model, listed, model._keep_in_fp32_modules)``, worked out once per
    graph: the config's ``modules_to_not_convert`` (the quantizer's ``defaults`` when it sets none, or beside them
    with ``add_default_skips``) and the parts the class keeps out of quantization (``Graph.kept_from_quantization``)."""

    def __init__(self, graph: Graph, defaults: Sequence[str], *, add_default_skips: bool = False):
        self.kept = graph.kept_from_quantization
        self.defaults = tuple(defaults)
        self.add_default_skips = add_default_skips
        self.found: list[ModulePatterns | None] = []

    def __call__(self, listed: ModulePatterns | None) -> ModulePatterns | None:
        """The patterns for the config's list, the same every node (one matcher for the graph, as for the list)."""
        if not self.found:
            defaults = self.defaults if listed is None or self.add_default_skips else ()
            entries = (*defaults, *(listed.entries if listed is not None else ()), *self.kept)
            same = listed is not None and entries == listed.entries
            self.found.append(listed if same else ModulePatterns(entries) if entries else None)
        return self.found[0]


NodePacker = Callable[[Node, ModulePatterns | None], Node]
"""A format's marking of one node's weights, given the config's ``modules_to_not_convert`` (None when unset)."""


def pack_graph(graph: Graph, s: Settings, method: str, pack_node: NodePacker, *, none: str) -> tuple[Graph, list[str]]:
    """The graph with the weights the ``method``'s quantizer converts marked packed by ``pack_node``, and sentences
    for what is not modelled (then nothing is marked, and the totals are of the unquantized weights); ``none`` says
    why nothing would be converted."""
    found = quantization_config(s, method)
    if found is None:
        return graph, []
    raw, where = found
    try:
        patterns = not_to_convert(raw)
        nodes = tuple(pack_node(node, patterns) for node in graph.nodes)
    except PatternTimeout as slow:
        # The slow pattern is a modules_to_not_convert entry, or (GPTQ) a ``-:`` key of ``dynamic``: its line.
        key = ("dynamic", slow.pattern) if slow.pattern.startswith("-:") else ("modules_to_not_convert",)
        raise s.document.error_at((*where.split("."), *key), str(slow)) from None
    except NotModelled as reason:
        return graph, [f"{where} ({method}) is not modelled: {reason}; {UNQUANTIZED}"]
    if not any(row.packed or row.scale_block for node in nodes for row in node.parameters):
        return graph, [f"{where} ({method}) is not modelled: {none}; {UNQUANTIZED}"]
    return replace(graph, nodes=nodes), []
