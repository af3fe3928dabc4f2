"""The keys the kimi_k25 family reads (the vision tower's and the projector's, in transformers' spelling and the
release's), their defaults, and the copy of a config transformers is given."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from archviz.graph.nodes import Dim
from archviz.inputs.settings import Key

NAME = "kimi_k25"

PATCHES = Dim(symbol="P", label="patches", formula="frames × rows × columns of patches, over every image")
"""The vision tower's sequence: every patch of every image (and video frame) in the batch, flattened."""
IMAGES = Dim(symbol="I", label="images")
"""Images and videos in the batch (``grid_thw`` has one row of frames, rows and columns each)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class KimiK25VisionKeys:
    """The keys of ``vision_config``: transformers 5.24's spelling (``Kimi_K25VisionConfig``) and, where the release
    spells a key otherwise for Moonshot's own code (its config.json), the release's."""

    hidden_size: Key = Key("hidden_size")
    """The vision width (transformers)."""
    vt_hidden_size: Key = Key("vt_hidden_size")
    """The vision width (the release)."""
    intermediate_size: Key = Key("intermediate_size")
    """The vision MLP's width (transformers)."""
    vt_intermediate_size: Key = Key("vt_intermediate_size")
    """The vision MLP's width (the release)."""
    num_hidden_layers: Key = Key("num_hidden_layers")
    """Vision blocks (transformers)."""
    vt_num_hidden_layers: Key = Key("vt_num_hidden_layers")
    """Vision blocks (the release)."""
    num_attention_heads: Key = Key("num_attention_heads")
    """Vision attention heads (transformers)."""
    vt_num_attention_heads: Key = Key("vt_num_attention_heads")
    """Vision attention heads (the release)."""
    pos_emb_height: Key = Key("pos_emb_height")
    """Rows of the learned position grid (transformers)."""
    init_pos_emb_height: Key = Key("init_pos_emb_height")
    """Rows of the learned position grid (the release)."""
    pos_emb_width: Key = Key("pos_emb_width")
    """Columns of the learned position grid (transformers)."""
    init_pos_emb_width: Key = Key("init_pos_emb_width")
    """Columns of the learned position grid (the release)."""
    pos_emb_time: Key = Key("pos_emb_time")
    """Frames of the learned position grid (transformers)."""
    init_pos_emb_time: Key = Key("init_pos_emb_time")
    """Frames of the learned position grid (the release)."""
    patch_size: Key = Key("patch_size")
    """A patch's side in pixels."""
    merge_kernel_size: Key = Key("merge_kernel_size")
    """The patch merge's rows and columns."""
    hidden_act: Key = Key("hidden_act", default="gelu_pytorch_tanh")
    """The vision MLP's activation."""
    text_hidden_size: Key = Key("text_hidden_size")
    """The text model's width, as the vision config restates it."""
    mm_hidden_size: Key = Key("mm_hidden_size")
    """The projector's LayerNorm width (the release)."""
    projector_ln_eps: Key = Key("projector_ln_eps")
    """The projector's LayerNorm epsilon (the release)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class KimiK25Schema:
    """The wrapper's own top-level keys (``Kimi_K25Config``); its text model's are deepseek_v3's
    (``DeepseekV3Schema``), its vision tower's ``KimiK25VisionKeys``."""

    vision_config: Key = Key("vision_config")
    """The vision tower's config."""
    text_config: Key = Key("text_config")
    """The text model's config."""
    projection_hidden_size: Key = Key("projection_hidden_size", default=1152)
    """The projector's LayerNorm width (transformers)."""
    projection_layer_norm_eps: Key = Key("projection_layer_norm_eps", default=1e-5)
    """The projector's LayerNorm epsilon (transformers)."""
    tie_word_embeddings: Key = Key("tie_word_embeddings")
    """Whether lm_head shares the token embedding's matrix (the wrapper's own flag)."""


K = KimiK25Schema()
"""The wrapper's keys."""
V = KimiK25VisionKeys()
"""``vision_config``'s keys."""
IMAGE_TOKENS = Dim(symbol="M", label="image tokens", formula=f"P ÷ ({V.merge_kernel_size} rows × columns × frames)")
"""Merged patches: one per 2×2 block of patches (frames of a video averaged), each one text-model token."""

# Keys of the vision tower and the projector, as transformers 5.24 reads them (``Kimi_K25VisionConfig``,
# ``Kimi_K25Config``) and as the release spells them for Moonshot's own code (its config.json). transformers reads
# only its own spellings and leaves the release's as inert attributes, so the graph reads either (they must agree
# when both are set) and the copy transformers is given has transformers' spelling filled in (``adapt_config``).
VISION_KEYS: tuple[tuple[str, str], ...] = (
    (V.hidden_size.name, V.vt_hidden_size.name),
    (V.intermediate_size.name, V.vt_intermediate_size.name),
    (V.num_hidden_layers.name, V.vt_num_hidden_layers.name),
    (V.num_attention_heads.name, V.vt_num_attention_heads.name),
    (V.pos_emb_height.name, V.init_pos_emb_height.name),
    (V.pos_emb_width.name, V.init_pos_emb_width.name),
    (V.pos_emb_time.name, V.init_pos_emb_time.name),
)
"""(transformers' key, the release's key) in ``vision_config``."""
PROJECTOR_KEYS: tuple[tuple[str, str], ...] = (
    (K.projection_hidden_size.name, V.mm_hidden_size.name),
    (K.projection_layer_norm_eps.name, V.projector_ln_eps.name),
)
"""(transformers' top-level key, the release's key in ``vision_config``)."""
PROJECTION_HIDDEN_DEFAULT = 1152
"""``Kimi_K25Config.projection_hidden_size``'s default, used when neither spelling is set."""
TIE_DEFAULT = True
"""``Kimi_K25Config.tie_word_embeddings``'s default: the top level decides whether lm_head is the embedding table."""


def adapt_config(config: dict[str, Any]) -> list[str]:
    """Give the copy transformers reads the release's vision sizes under transformers' names (only where it sets none):
    transformers 5.24 reads ``hidden_size``, ``pos_emb_height``, ``projection_hidden_size`` and ignores the release's
    ``vt_hidden_size``, ``init_pos_emb_height``, ``mm_hidden_size``, so without this a release whose sizes differ from
    transformers' defaults would be built at the defaults."""
    changes: list[str] = []
    vision = config.get(K.vision_config.name)
    if not isinstance(vision, dict):
        return changes
    for ours, theirs in VISION_KEYS:
        if theirs in vision and ours not in vision:
            vision[ours] = copy.deepcopy(vision[theirs])
            changes.append(f"{K.vision_config}.{theirs} is given to transformers as {K.vision_config}.{ours}")
    for ours, theirs in PROJECTOR_KEYS:
        if theirs in vision and ours not in config:
            config[ours] = copy.deepcopy(vision[theirs])
            changes.append(f"{K.vision_config}.{theirs} is given to transformers as {ours}")
    if changes:
        changes = [
            "transformers reads none of the release's own spellings of the vision keys; "
            + "; ".join(changes)
            + " (so that it builds the tower the release describes)"
        ]
    return changes
