"""Names the views give to parts of a model: the terminal's totals table, the model card and the site's overview."""

from __future__ import annotations

PART_TITLES = {"text": "text model", "vision": "vision tower", "projector": "multimodal projector"}
"""How the totals name each part of a model with an image encoder."""
