"""What the llama-style families say of the nodes no shared block words."""

from __future__ import annotations

from archviz.families.blocks.decoder import BLOCK_CLAIM, MODEL_CLAIM
from archviz.families.blocks.node_words import Words, WordsTable

NODE_WORDS = WordsTable(
    {
        "model": Words(
            title="{architecture}",
            summary="Embeds the tokens, runs every decoder block, normalizes and projects to vocabulary logits.",
            claim=MODEL_CLAIM,
        ),
        "block": Words(
            title="Decoder block",
            summary="A block applies input RMSNorm, {attention} and a residual addition, then post-attention RMSNorm, "
            "{ffn} and a second residual addition.",
            claim=BLOCK_CLAIM,
        ),
    }
)
"""The words of the family's model group and decoder blocks."""
