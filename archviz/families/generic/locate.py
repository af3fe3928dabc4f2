"""Locators for a graph read off the code, made per graph from its module paths, for the provenance stage."""

from __future__ import annotations

import re
from collections.abc import Mapping

from archviz.code.finder import class_attributes, find_site
from archviz.code.locators import Category, Locator, Role, attribute, method
from archviz.code.pins import SourceFile
from archviz.graph.nodes import Graph, Group, GroupKind, Node

# A generic node's title ends with its module's class in parentheses (``layer · attention · q_proj (Linear)``):
# ``words.node_title``.
_GENERIC_TITLE = re.compile(r"(?P<names>.+) \((?P<cls>[A-Za-z_][A-Za-z0-9_]*)\)")


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def locators(graph: Graph, source: SourceFile) -> tuple[dict[str, Locator], dict[str, Locator]]:
    """Locators for a generic graph's nodes and groups, read off their module paths.

    A node built with a locator keeps it. Any other node stands for ``self.<attribute>`` of the module class that
    owns it (its code, ``self.q_proj``, is its module path's last component; a module holding parameters besides
    its children names those). The
    owner is its group's class when the node sits directly in its parent module's group, else the only
    class of ``source`` whose ``__init__`` assigns the attribute; the sites are that assignment and its
    uses in ``forward`` (and the methods ``forward`` calls). A node whose owner the file does not define,
    or which several classes could own, gets no sites and says why.
    """
    built = class_attributes(source)
    groups = {group.id: group for group in graph.groups}
    nodes = {
        # A node built with its own locator (attention's core, a mixer's recurrence) keeps it.
        node.id: node.locate or _generic_node_locator(node, groups, built, source)
        for node in graph.nodes
    }
    group_locators = {
        group.id: locator
        for group in graph.groups
        if (locator := _generic_group_locator(group, built, source)) is not None
    }
    return nodes, group_locators


def _generic_node_locator(
    node: Node, groups: Mapping[str, Group], built: Mapping[str, frozenset[str]], source: SourceFile
) -> Locator:
    title = _GENERIC_TITLE.fullmatch(node.title)
    group = groups.get(node.group)
    category = _generic_category(title.group("cls") if title else "", group)
    parts = node.code.split(", ")
    attributes = [part.removeprefix("self.") for part in parts]
    if not all(part.startswith("self.") and _IDENTIFIER.fullmatch(part[5:]) for part in parts):
        why = f"{node.title} is not an attribute of a module class (its code is {node.code})"
        return Locator(claim=f"{node.title}.", category=category, sites=(), absent=why)
    owner = _generic_owner(node, group)
    if owner is not None and owner not in built:
        why = f"its owner {owner}, which builds self.{attributes[0]}, is not defined in {source.path}"
        return Locator(claim=f"{owner} builds {node.title}.", category=category, sites=(), absent=why)
    if owner is None:
        candidates = [name for name, names in built.items() if attributes[0] in names]
        if len(candidates) != 1:
            said = ", ".join(candidates) if candidates else "no class"
            why = (
                f"the node does not say which module class owns self.{attributes[0]}, and {said} in "
                f"{source.path} {'builds' if len(candidates) < 2 else 'build'} it"
            )
            return Locator(claim=f"{node.title}.", category=category, sites=(), absent=why)
        owner = candidates[0]
    classes = (owner,)
    sites = tuple(site for name in attributes for site in attribute(classes, name))
    module_class = title.group("cls") if title else None
    what = ", ".join(f"self.{name}" for name in attributes)
    if module_class is not None and module_class != owner:
        what += f" ({module_class})"
    used = any(find_site(site, source) for site in sites if site.role is Role.USE)
    them = "them" if len(attributes) > 1 else "it"
    claim = f"{owner} builds {what} in __init__" + (f" and uses {them} in its forward pass." if used else ".")
    return Locator(claim=claim, category=category, sites=sites)


def _generic_owner(node: Node, group: Group | None) -> str | None:
    """The class of the module that owns the node's attribute, when the node's group is that module's.

    Group and node ids are both made from module paths, so the node sits directly in its owner's group
    when its id is the group's id and one more component. The root group is the root module, titled after
    the architecture it is built as: it owns the nodes of one component (``lm_head``, T5's ``shared``),
    while deeper ones in it belong to the base model a task model wraps (``model.embed_tokens``), which
    has no group of its own and so is not named.
    """
    if group is None or not _IDENTIFIER.fullmatch(group.title):
        return None
    if group.parent is None:
        return group.title if "." not in node.id else None
    rest = node.id.removeprefix(f"{group.id}.")
    return group.title if rest != node.id and "." not in rest else None


def _generic_category(module_class: str, group: Group | None) -> Category:
    if module_class.endswith("Embedding"):
        return Category.EMBEDDING
    if "Norm" in module_class:
        return Category.NORM
    kinds = {
        GroupKind.ATTENTION: Category.ATTENTION,
        GroupKind.MLP: Category.MLP,
        GroupKind.MOE: Category.MOE,
        GroupKind.EXPERTS: Category.MOE,
        GroupKind.BLOCK: Category.BLOCK,
    }
    return kinds.get(group.kind, Category.TRANSFORMER) if group is not None else Category.TRANSFORMER


def _generic_group_locator(group: Group, built: Mapping[str, frozenset[str]], source: SourceFile) -> Locator | None:
    """A group is a module class (the root group its architecture): its ``__init__`` and ``forward``."""
    if group.title not in built:
        return None
    classes = (group.title,)
    sites = (method(classes, "__init__"), method(classes, "forward"))
    runs = find_site(sites[1], source)
    if group.parent is None:
        claim = f"{group.title} builds the model in __init__" + (" and runs it in its forward pass." if runs else ".")
    else:
        claim = f"{group.title} builds this group's modules in __init__" + (
            " and runs them in its forward pass." if runs else "."
        )
    return Locator(claim=claim, category=_generic_category(group.title, group), sites=sites)
