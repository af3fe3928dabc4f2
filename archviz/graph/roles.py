"""The roles every family shares: the token embedding, attention, the FFN and the output head.

Node ids say little across families (a llama-style attention has ``q-proj`` where MLA has ``q-a-proj``), so two
graphs of different families are compared role by role: ``node_roles`` reads each main-model node's role off the
graph's groups, and ``role_form`` says what a role is made of.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from archviz.graph.nodes import Graph, GroupKind, Node, NodeKind, Part


class RoleName(StrEnum):
    """What a main-model node does, in terms every family shares."""

    EMBEDDING = "token embedding"
    ATTENTION = "attention"
    FFN = "FFN"
    HEAD = "output head"


_FFN_GROUPS = frozenset({GroupKind.MLP, GroupKind.MOE, GroupKind.EXPERTS})


def node_roles(graph: Graph) -> dict[str, RoleName]:
    """The role of each main-model node that has one: the graph's input embedding; the output head (the last
    learned node outside the layers); every node inside an attention group (MLA, KDA, attention); every node inside
    an MLP, MoE or experts group."""
    groups = {group.id: group for group in graph.groups}

    def kinds(group_id: str | None) -> set[GroupKind]:
        found = set()
        while group_id is not None and group_id in groups:
            found.add(groups[group_id].kind)
            group_id = groups[group_id].parent
        return found

    main = [node for node in graph.nodes if node.part is Part.MAIN]
    heads = [n for n in main if n.kind is NodeKind.LEARNED and not n.placement.layers and n.id != graph.input_embedding]
    head = heads[-1].id if heads else None
    roles: dict[str, RoleName] = {}
    for node in main:
        enclosing = kinds(node.group)
        if node.id == graph.input_embedding:
            roles[node.id] = RoleName.EMBEDDING
        elif node.id == head:
            roles[node.id] = RoleName.HEAD
        elif GroupKind.ATTENTION in enclosing:
            roles[node.id] = RoleName.ATTENTION
        elif enclosing & _FFN_GROUPS:
            roles[node.id] = RoleName.FFN
    return roles


def role_form(graph: Graph, role: RoleName, nodes: Sequence[Node], layers: Sequence[int]) -> list[str]:
    """What the role is made of: the layer map's mixers or FFN kinds, or the weight's shape (or what it is tied to)."""
    if role in (RoleName.ATTENTION, RoleName.FFN):
        wanted = set(layers)
        kinds = {
            layer.mixer if role is RoleName.ATTENTION else layer.ffn for layer in graph.layers if layer.index in wanted
        }
        return list(sorted(kinds))
    forms: list[str] = []
    for node in nodes:
        if node.shares_parameters_with:
            forms.append(f"tied to {node.shares_parameters_with}")
        forms.extend(" × ".join(f"{size:,}" for size in row.shape) for row in node.parameters)
    return forms
