"""What the deepseek_v3 family says: its decoder blocks' words and its config sentence."""

from __future__ import annotations

from archviz.families.blocks.decoder import BLOCK_CLAIM
from archviz.families.blocks.mla import MLA_DECODER_WORDS
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.deepseek_v3.schema import K

WORDS = MLA_DECODER_WORDS
"""What DeepSeek-V3's own keys add to the sentence describing a released configuration: the dense layers' key and
MLA's shape (the shared table, which the family reading a model off its code speaks with too)."""

_BLOCK_SUMMARY = (
    "A block applies input RMSNorm, attention and a residual addition, then post-attention RMSNorm, the FFN and a "
    f"second residual addition; the first {K.first_k_dense_replace} blocks use the dense MLP, the rest the MoE."
)

NODE_WORDS = WordsTable({"block": Words(title="Decoder block", summary=_BLOCK_SUMMARY, claim=BLOCK_CLAIM)})
"""The words of the family's decoder blocks (the model group's are the builder's ``model_words``)."""

MTP_WORDS = WordsTable({"block": Words(title="MTP decoder block", summary=_BLOCK_SUMMARY, claim=BLOCK_CLAIM)})
"""The words of the multi-token-prediction layers' decoder block."""
