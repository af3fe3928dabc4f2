"""The parameter-free work of a sparse-attention indexer: MiniMax-M3's lightning indexer (``MiniMaxM3VLIndexer``).

In a sparse layer the attention module holds an indexer whose ``q_proj`` and ``k_proj`` make a few index heads of
queries and one index key per position. The indexer caches the index keys beside the layer's keys and values
(``MiniMaxM3VLSparseCacheLayer.idx_keys``, ``(B, 1, positions, index width)``), scores every query's index heads
against every cached index key in float32, takes each block of keys' best score, and keeps per index head the top
blocks and the local ones. The attention it selects for is the caller's core: transformers' eager and SDPA paths
turn the selection into a mask over the full score matrix (``build_block_mask``), so the core computes, and torch
counts, every score whatever the selection keeps.

Sizes come in as ``(value, config key)`` (``archviz.families.blocks.mixers.Size``), read off the built indexer.
Source: transformers ``models/minimax_m3_vl`` (``MiniMaxM3VLIndexer.forward``, ``build_block_mask``,
``MiniMaxM3VLSparseCacheLayer.update_index``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archviz.code.locators import Category, statement
from archviz.families.blocks.builder import BATCH, KEY_POSITIONS, POSITIONS, Scope, shape
from archviz.families.blocks.mixers import Size, keyed
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.graph.nodes import Dim, NodeKind, Op, OpKind, Setting

LIGHTNING_INDEXER = ("M3VLIndexer",)
"""The lightning indexer's class (``MiniMaxM3VLIndexer``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexerNodes:
    """The ids of the nodes the indexer's helper added, in forward order."""

    cache: str
    """The cached index keys (``OpKind.CACHE``)."""
    scores: str
    """The index scores and the block selection (``OpKind.INDEX_SCORES``)."""


def indexer_nodes(
    at: Scope,
    *,
    heads: Size,
    head_dim: Size,
    block_size: Size,
    topk_blocks: Size,
    local_blocks: Size,
) -> IndexerNodes:
    """The index key cache ``(B, 1, S, index width)`` and the index scores of ``heads`` index heads, added to
    ``at``'s group with ids ``at.prefix + index-key-cache`` and ``at.prefix + index-scores``."""
    scope = replace(at, category=Category.ATTENTION, words=NODE_WORDS)
    classes = LIGHTNING_INDEXER
    h, d = keyed(heads), keyed(head_dim)
    one = Dim(symbol="1", label="dim", value=1)  # the one key head, a plain number
    new_key = shape("idx_k", BATCH, one, POSITIONS, d)
    cached = shape("idx_keys", BATCH, one, KEY_POSITIONS, d)
    cache = scope.node(
        "index-key-cache",
        kind=NodeKind.OPERATOR,
        code="cache.layers[self.layer_idx].update_index(idx_k)",
        inputs=[new_key],
        outputs=[cached],
        sites=(statement(classes, ".update_index("),),
        op=Op(kind=OpKind.CACHE),
    )
    settings = [
        Setting(name=name, value=size[0], config_keys=(size[1],))
        for name, size in (("block size", block_size), ("top blocks", topk_blocks), ("local blocks", local_blocks))
    ]
    scores = scope.node(
        "index-scores",
        fill={"block_size": block_size[1], "top_blocks": topk_blocks[1], "local_blocks": local_blocks[1]},
        kind=NodeKind.OPERATOR,
        code="scores = torch.matmul(idx_q.float(), idx_k.float().transpose(-1, -2))",
        inputs=[shape("idx_q", BATCH, h, POSITIONS, d, dtype="float32"), cached],
        outputs=[shape("block_indices", BATCH, h, POSITIONS, keyed(topk_blocks), dtype="int64")],
        settings=settings,
        sites=(statement(classes, "torch.matmul("), statement(classes, ".topk(")),
        op=Op(kind=OpKind.INDEX_SCORES),
    )
    return IndexerNodes(cache=cache, scores=scores)


def sparse_attention_indexer_nodes(
    at: Scope, *, classes: tuple[str, ...], heads: Size, head_dim: Size, topk: Size
) -> IndexerNodes:
    """DeepSeek Sparse Attention's indexer (``DeepseekV32Indexer`` and its kin, ``classes``): the index key cache
    ``(B, S, index width)``, one key per position shared by every index head, and the index scores: every query's
    ``heads`` index heads against every cached index key, each head's scores weighted by ``weights_proj`` and summed,
    and the ``topk`` best keys kept. Ids ``at.prefix + indexer-key-cache`` and ``at.prefix + indexer-scores``."""
    scope = replace(at, category=Category.ATTENTION, words=NODE_WORDS)
    h, d = keyed(heads), keyed(head_dim)
    cached = shape("indexer_keys", BATCH, KEY_POSITIONS, d)
    cache = scope.node(
        "indexer-key-cache",
        kind=NodeKind.OPERATOR,
        code="k = cache.update_indexer(k, self.layer_idx)",
        inputs=[shape("k", BATCH, POSITIONS, d)],
        outputs=[cached],
        sites=(statement(classes, ".update_indexer("),),
        op=Op(kind=OpKind.CACHE),
    )
    scores = scope.node(
        "indexer-scores",
        fill={"top_k": topk[1]},
        kind=NodeKind.OPERATOR,
        code="scores = torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)) * self.softmax_scale",
        # The per-head weights are the third input: the pricer adds their sum over heads (``_index_scores``).
        inputs=[
            shape("q", BATCH, POSITIONS, h, d, dtype="float32"),
            cached,
            shape("weights", BATCH, POSITIONS, h, dtype="float32"),
        ],
        outputs=[shape("topk_indices", BATCH, POSITIONS, keyed(topk), dtype="int32")],
        settings=[Setting(name="top-k keys", value=topk[0], config_keys=(topk[1],))],
        sites=(statement(classes, "torch.matmul("), statement(classes, ".topk(")),
        op=Op(kind=OpKind.INDEX_SCORES),
    )
    return IndexerNodes(cache=cache, scores=scores)


NODE_WORDS = WordsTable(
    {
        "index-scores": Words(
            title="Index scores and block selection",
            summary="Score each query's index heads against every cached index key in float32, take each block of "
            "{block_size} keys' best score, and keep per index head the {top_blocks} best blocks and the "
            "{local_blocks} nearest; attention is masked to them (its eager and SDPA paths still score every key).",
            claim="The indexer scores every query's index heads against every cached index key and keeps the best "
            "blocks of keys for attention.",
        ),
        "indexer-scores": Words(
            title="Indexer scores and top-k selection",
            summary="Score each query's index heads against every cached index key (ReLU, in float32), weight each "
            "head's scores by its per-token weight and sum them, and keep the {top_k} best keys; attention is masked "
            "to them (its eager and SDPA paths still score every key).",
            claim="The indexer scores every query against every cached index key and keeps the best keys for "
            "attention.",
        ),
        "indexer-key-cache": Words(
            title="Indexer key cache",
            summary="Append this step's index keys (one per position, shared by every index head) to the layer's "
            "cache and return every cached position's.",
            claim="The indexer caches one index key per position beside the layer's latent.",
        ),
        "index-key-cache": Words(
            title="Index key cache",
            summary=(
                "Append this step's index keys (one head, shared by every index head) to the layer's cache and "
                "return every cached position's."
            ),
            claim="The indexer caches one index key per position beside the layer's keys and values.",
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""
