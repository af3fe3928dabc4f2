"""Source provenance: the lines of a modeling file that define and use each operator.

Every node of the graph cites code at a pinned revision (the file is pinned by ``archviz.code.pins``). This module
finds the code that matters in it by walking its syntax tree (``find_attribute_definition``, ``find_attribute_use``,
``find_statement`` and friends, and ``find_site`` for a locator's site); ``archviz.code.excerpts`` cuts the lines found
into excerpts the way the cards show them. Line numbers are always an output, computed from the file's text; nothing
stores them.

The source is only ever *read*: ``archviz.code.syntax`` parses it with ``ast`` and tokenizes it with ``tokenize``,
never imports, compiles to bytecode or executes it, so a planted modeling file cannot run code here. This module must
not import torch or transformers; it finds transformers' files through package metadata.

Class names are matched by the rule in ``resolve_class_name``: an exact name, then the family's own
class (``<Family><suffix>``, where ``<Family>PreTrainedModel`` names the family), then a unique suffix.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeGuard

from archviz.code.locators import Role, Site, SiteKind
from archviz.code.pins import SourceFile
from archviz.code.syntax import (
    SourceSpan,
    _common_statements,
    _context_start,
    _descendant_statements,
    _enclosing_statement,
    _node_end,
    _node_start,
    _parent_map,
    _parse,
    _source_order,
    _statement_texts,
    _statements,
    _walk,
)
from archviz.common.errors import InputError

ClassPattern = str | tuple[str, ...]
"""A class-name suffix, or several tried in order (the first that names a class wins)."""


def resolve_class_name(src: SourceFile, class_suffix: ClassPattern) -> str | None:
    """The module-level class that ``class_suffix`` names in ``src``, or None when none matches.

    For each suffix in turn (a tuple is tried in order):

    1. a class named exactly the suffix;
    2. the family's own class ``<Family><suffix>``, where the module defines a
       ``<Family>PreTrainedModel``, when exactly one family has such a class (so ``"Model"`` is
       ``DeepseekV3Model``, not ``DeepseekV3PreTrainedModel``, and ``"Attention"`` is
       ``KimiLinearAttention``, not ``KimiLinearDeltaAttention``);
    3. the only class whose name ends with the suffix.

    Several classes ending with the suffix and none chosen by rules 1–2 is ambiguous: ``InputError``
    names the candidates. Pass a longer suffix (``"DeltaAttention"``) or the full name.
    """
    parsed = _parse(src.path, src.text)
    patterns = (class_suffix,) if isinstance(class_suffix, str) else class_suffix
    family_prefixes = {
        name.removesuffix("PreTrainedModel")
        for name in parsed.classes
        if name.endswith("PreTrainedModel") and name != "PreTrainedModel"
    }
    for pattern in patterns:
        if not pattern:
            raise ValueError("empty class suffix")
        if pattern in parsed.classes:
            return pattern
        family_names = [prefix + pattern for prefix in family_prefixes if prefix + pattern in parsed.classes]
        if len(family_names) == 1:
            return family_names[0]
        candidates = [name for name in parsed.classes if name.endswith(pattern)]
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            raise InputError(
                f"class suffix {pattern!r} is ambiguous: {', '.join(candidates)}",
                path=src.path,
                line=parsed.classes[candidates[0]].lineno,
            )
    return None


def find_class(src: SourceFile, class_suffix: ClassPattern) -> SourceSpan | None:
    """The whole class definition, decorators included."""
    class_def = _find_class_def(src, class_suffix)
    return None if class_def is None else _span(src, _node_start(class_def), _node_end(class_def))


def find_function(src: SourceFile, name: str) -> SourceSpan | None:
    """A module-level function (``yarn_get_mscale``), decorators included."""
    function = _parse(src.path, src.text).functions.get(name)
    return None if function is None else _span(src, _node_start(function), _node_end(function))


def find_method(src: SourceFile, *, class_suffix: ClassPattern, method: str) -> SourceSpan | None:
    """A method of the class, decorators included; inherited from a base class in the same file when
    the class does not define it."""
    function = _find_method_def(src, class_suffix, method)
    return None if function is None else _span(src, _node_start(function), _node_end(function))


def find_attribute_definition(
    src: SourceFile, *, class_suffix: ClassPattern, attribute: str, method: str = "__init__"
) -> SourceSpan | None:
    """The statement in ``method`` (``__init__``) that assigns ``self.<attribute>``, all its lines.

    When the attribute is assigned in several places (``if …: self.mlp = MoE(…) else: self.mlp =
    MLP(…)``) the span is the smallest statement holding them all, or the run of sibling statements
    from the first to the last. Base classes defined in the same file are searched when the class's
    own ``method`` does not assign it.
    """
    for function in _method_chain(src, class_suffix, method):
        self_name = _self_name(function)
        if self_name is None:
            continue
        parents = _parent_map(function)
        assignments = [
            statement for statement in _statements(function) if _assigns_attribute(statement, self_name, attribute)
        ]
        if assignments:
            first, last = _common_statements(assignments, parents, function)
            return _span(src, _node_start(first), _node_end(last))
    return None


def find_attribute_uses(
    src: SourceFile,
    *,
    class_suffix: ClassPattern,
    attribute: str,
    method: str | None = "forward",
    with_context: bool = False,
) -> list[SourceSpan]:
    """Every statement that calls ``self.<attribute>(…)`` in ``method`` and in the methods it calls
    through ``self`` (``forward`` → ``expand_kv`` → ``self.kv_b_proj(…)``): ``method``'s own uses
    first, then each called method's, breadth first, each in source order.

    Only when nothing calls it are reads returned instead: first where it is indexed (``expert =
    self.experts[i]``, a module list's member taken to be run), else any (``for layer in self.layers:``).
    The span is the innermost statement holding the call, all its lines; a call in the header of a
    compound statement (an ``if`` test, a ``for`` iterable) yields that whole compound statement.
    ``with_context`` also takes the header of the ``if``/``elif`` directly enclosing the statement and
    the comment lines right above (``# Get inputs_embeds`` / ``if inputs_embeds is None:``).
    Methods are inherited from base classes in the same file. ``method=None`` searches every method
    the class itself defines except ``__init__``.
    """
    parsed = _parse(src.path, src.text)
    class_def = _find_class_def(src, class_suffix)
    functions: Sequence[ast.FunctionDef | ast.AsyncFunctionDef] = ()
    if class_def is not None and method is None:
        functions = [function for function in _methods(class_def) if function.name != "__init__"]
    elif class_def is not None and method is not None:
        functions = _reachable_methods(src, class_def, method)
    calls: list[tuple[ast.stmt, dict[ast.AST, ast.AST]]] = []
    indexed: list[tuple[ast.stmt, dict[ast.AST, ast.AST]]] = []
    reads: list[tuple[ast.stmt, dict[ast.AST, ast.AST]]] = []
    for function in functions:
        if _self_name(function) is None:
            continue
        parents = _parent_map(function)
        for node in _self_attribute_loads(function).get(attribute, ()):
            statement = _enclosing_statement(node, parents)
            if statement is None or statement is function:
                continue
            parent = parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                calls.append((statement, parents))
            elif isinstance(parent, ast.Subscript) and parent.value is node:
                indexed.append((statement, parents))  # ``expert = self.experts[i]``: a module taken to be run
            else:
                reads.append((statement, parents))
    found = calls or indexed or reads
    spans: list[SourceSpan] = []
    seen: set[int] = set()
    for statement, parents in found:
        if id(statement) in seen:
            continue
        seen.add(id(statement))
        start = _context_start(statement, parents, parsed) if with_context else _node_start(statement)
        spans.append(_span(src, start, _node_end(statement)))
    return spans


def find_attribute_use(
    src: SourceFile,
    *,
    class_suffix: ClassPattern,
    attribute: str,
    method: str | None = "forward",
    with_context: bool = False,
) -> SourceSpan | None:
    """The first statement in ``method`` that calls ``self.<attribute>(…)``; see ``find_attribute_uses``
    (``inputs_embeds = self.embed_tokens(input_ids)``)."""
    spans = find_attribute_uses(
        src, class_suffix=class_suffix, attribute=attribute, method=method, with_context=with_context
    )
    return spans[0] if spans else None


def find_statement(
    src: SourceFile,
    *,
    class_suffix: ClassPattern | None,
    method: str,
    contains: str,
    with_context: bool = False,
    occurrence: int = 1,
) -> SourceSpan | None:
    """The innermost statement in ``method`` whose source text contains ``contains``, the ``occurrence``-th
    in source order (``contains="logits = self.lm_head"``; ``occurrence=2`` is a block's second
    ``residual = hidden_states``); when ``method`` has none, the first of the methods it calls through
    ``self`` that has (``forward`` → ``moe_infer`` → ``expert_out = expert(…)``), breadth first.

    The span is the whole statement, every line of a call written over several. ``class_suffix=None`` makes
    ``method`` a module-level function. ``with_context`` is as for ``find_attribute_uses``.
    """
    if occurrence < 1:
        raise ValueError(f"occurrence must be at least 1, got {occurrence}")
    if not contains:
        raise ValueError("find_statement needs a non-empty 'contains'")
    if class_suffix is None:
        function = _parse(src.path, src.text).functions.get(method)
        return None if function is None else _statement_in(src, function, contains, with_context, occurrence)
    class_def = _find_class_def(src, class_suffix)
    for function in [] if class_def is None else _reachable_methods(src, class_def, method):
        span = _statement_in(src, function, contains, with_context, occurrence)
        if span is not None:
            return span
    return None


def _statement_in(
    src: SourceFile,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    contains: str,
    with_context: bool,
    occurrence: int,
) -> SourceSpan | None:
    """The ``occurrence``-th innermost statement of ``function`` whose text contains ``contains``."""
    parsed = _parse(src.path, src.text)
    parents = _parent_map(function)
    matches = [statement for statement, text in _statement_texts(parsed, function) if contains in text]
    matched = {id(statement) for statement in matches}
    innermost = [
        statement
        for statement in matches
        if not any(id(inner) in matched for inner in _descendant_statements(statement))
    ]
    if len(innermost) < occurrence:
        return None
    statement = sorted(innermost, key=lambda node: (node.lineno, node.col_offset))[occurrence - 1]
    start = _context_start(statement, parents, parsed) if with_context else _node_start(statement)
    return _span(src, start, _node_end(statement))


def class_attributes(src: SourceFile) -> dict[str, frozenset[str]]:
    """For every module-level class of the file, the ``self.<attribute>`` names its own ``__init__`` assigns."""
    built: dict[str, frozenset[str]] = {}
    for name, class_def in _parse(src.path, src.text).classes.items():
        names: set[str] = set()
        for function in _methods(class_def):
            self_name = _self_name(function)
            if function.name != "__init__" or self_name is None:
                continue
            names.update(
                target.attr
                for target in _walk(function)
                if isinstance(target, ast.Attribute)
                and isinstance(target.ctx, ast.Store)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            )
        built[name] = frozenset(names)
    return built


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteMatch:
    """A locator site that was found: the needle that matched and the lines."""

    site: Site
    """The site."""
    needle: str
    """The attribute, substring or name that matched (empty for a class)."""
    span: SourceSpan
    """The lines."""


def find_site(site: Site, source: SourceFile) -> tuple[SiteMatch, ...]:
    """Where one locator site is in ``source``; empty when it is not there.

    An ambiguous class pattern raises ``InputError``; the provenance stage records it per node.
    """
    if site.kind is not SiteKind.FUNCTION and not site.classes:
        return ()
    if site.kind is SiteKind.CLASS:
        span = find_class(source, site.classes)
        return () if span is None else (SiteMatch(site=site, needle="", span=span),)
    for needle in site.needles:
        spans = _find_needle(site, source, needle)
        if spans:
            return tuple(SiteMatch(site=site, needle=needle, span=span) for span in spans)
    return ()


def _find_needle(site: Site, source: SourceFile, needle: str) -> list[SourceSpan]:
    classes = site.classes
    if site.kind is SiteKind.FUNCTION:
        span = find_function(source, needle)
    elif site.kind is SiteKind.METHOD:
        span = find_method(source, class_suffix=classes, method=needle)
    elif site.kind is SiteKind.ATTRIBUTE and site.role is Role.DEFINITION:
        span = find_attribute_definition(
            source, class_suffix=classes, attribute=needle, method=site.method or "__init__"
        )
    elif site.kind is SiteKind.ATTRIBUTE:
        spans = find_attribute_uses(
            source,
            class_suffix=classes,
            attribute=needle,
            method=site.method or "forward",
            with_context=site.with_context,
        )
        return spans if site.every else spans[:1]
    else:
        span = find_statement(
            source,
            class_suffix=classes,
            method=site.method or "forward",
            contains=needle,
            with_context=site.with_context and site.role is Role.USE,
            occurrence=site.occurrence,
        )
    return [] if span is None else [span]


def _find_class_def(src: SourceFile, class_suffix: ClassPattern) -> ast.ClassDef | None:
    name = resolve_class_name(src, class_suffix)
    return None if name is None else _parse(src.path, src.text).classes[name]


def _class_chain(src: SourceFile, class_def: ast.ClassDef) -> list[ast.ClassDef]:
    """The class, then its bases defined in the same file, depth first (a plain-name approximation of
    the method resolution order; bases from other modules are not followed)."""
    classes = _parse(src.path, src.text).classes
    chain: list[ast.ClassDef] = []
    pending = [class_def]
    while pending:
        current = pending.pop(0)
        if any(current is seen for seen in chain):
            continue
        chain.append(current)
        bases = [classes[base.id] for base in current.bases if isinstance(base, ast.Name) and base.id in classes]
        pending = bases + pending
    return chain


def _methods(class_def: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in class_def.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _method_chain(
    src: SourceFile, class_suffix: ClassPattern, method: str
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """``method`` as defined by the class and by each same-file base, nearest first."""
    class_def = _find_class_def(src, class_suffix)
    return [] if class_def is None else _method_definitions(src, class_def, method)


def _method_definitions(
    src: SourceFile, class_def: ast.ClassDef, method: str
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for owner in _class_chain(src, class_def):
        # The last definition in a class body wins, as at run time.
        definitions = [function for function in _methods(owner) if function.name == method]
        if definitions:
            found.append(definitions[-1])
    return found


def _find_method_def(
    src: SourceFile, class_suffix: ClassPattern, method: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    chain = _method_chain(src, class_suffix, method)
    return chain[0] if chain else None


def _reachable_methods(
    src: SourceFile, class_def: ast.ClassDef, method: str
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]:
    """``method``, then the methods it calls as ``self.<name>(…)``, breadth first, each once."""
    return _reachable_in(src, class_def, method)


# A memo like _parse's (the class is one of the trees _parse keeps): every locator site of a class asks for the same
# methods. Callers must not mutate what it returns.
@lru_cache(maxsize=1024)
def _reachable_in(
    src: SourceFile, class_def: ast.ClassDef, method: str
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]:
    first = _method_definitions(src, class_def, method)
    order: list[ast.FunctionDef | ast.AsyncFunctionDef] = first[:1]
    index = 0
    while index < len(order):
        function = order[index]
        index += 1
        for name in _self_calls(function):
            called = _method_definitions(src, class_def, name)
            if called and not any(called[0] is known for known in order):
                order.append(called[0])
    return tuple(order)


def _source_walk(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """Every node of the function, nested ones included, in source order."""
    return _source_order(_walk(function))


# Memos like _parent_map's: one walk of a method's tree answers every locator site that looks into it. Callers must
# not mutate what they return.
@lru_cache(maxsize=1024)
def _self_calls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """The names of the ``self.<name>(…)`` calls in the method, in source order (empty without ``self``)."""
    self_name = _self_name(function)
    if self_name is None:
        return ()
    return tuple(
        node.func.attr
        for node in _source_walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and _is_self_attribute(node.func, self_name, node.func.attr)
    )


@lru_cache(maxsize=1024)
def _self_attribute_loads(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[ast.Attribute, ...]]:
    """Each attribute the method reads as ``self.<attribute>``: where, in source order (empty without ``self``)."""
    self_name = _self_name(function)
    loads: dict[str, list[ast.Attribute]] = {}
    if self_name is None:
        return {}
    for node in _source_walk(function):
        if _is_self_attribute(node, self_name, node.attr if isinstance(node, ast.Attribute) else "") and isinstance(
            node.ctx, ast.Load
        ):
            loads.setdefault(node.attr, []).append(node)
    return {attribute: tuple(nodes) for attribute, nodes in loads.items()}


def _self_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name a method calls its instance (``self``), or None for a method without one."""
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Name) and decorator.id in {"staticmethod", "classmethod"}:
            return None
    positional = [*function.args.posonlyargs, *function.args.args]
    return positional[0].arg if positional else None


def _is_self_attribute(node: ast.AST, self_name: str, attribute: str) -> TypeGuard[ast.Attribute]:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attribute
        and isinstance(node.value, ast.Name)
        and node.value.id == self_name
    )


def _assigns_attribute(statement: ast.stmt, self_name: str, attribute: str) -> bool:
    if isinstance(statement, ast.Assign):
        targets: list[ast.expr] = list(statement.targets)
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets = [statement.target]
    else:
        return False
    return any(_is_self_attribute(target, self_name, attribute) for target in _flatten_targets(targets))


def _flatten_targets(targets: Iterable[ast.expr]) -> Iterator[ast.expr]:
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List):
            yield from _flatten_targets(target.elts)
        elif isinstance(target, ast.Starred):
            yield from _flatten_targets([target.value])
        else:
            yield target


def _span(src: SourceFile, start: int, end: int) -> SourceSpan:
    return SourceSpan(path=src.path, start=start, end=end)
