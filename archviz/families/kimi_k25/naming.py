"""Kimi-K2.5's names: the classes of transformers' modeling_kimi_k25.py and the release's checkpoint names."""

from __future__ import annotations

# Class-name patterns of transformers' modeling_kimi_k25.py.
PATCH_EMBED = ("VisionPatchEmbed",)
POSITIONS = ("VisionPositionEmbeddings",)
ROTARY = ("VisionRotaryEmbedding",)
LAYER = ("VisionEncoderLayer",)
ATTENTION = ("VisionAttention",)
MLP = ("VisionMLP",)
TOWER = ("VisionModel",)
PROJECTOR = ("MultimodalProjection",)
WRAPPER = ("K25Model",)

SCATTER = "image-scatter"
"""The wrapper's own node in the model group: the image features written into the token embeddings."""
BLOCK = "vision_tower.encoder.blocks.{layer}"
"""The release's checkpoint name of one encoder layer (transformers' module: ``model.vision_tower.layers.{layer}``)."""
