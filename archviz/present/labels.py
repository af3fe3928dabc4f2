"""Names the views give to parts of a model: the terminal's totals table, the model card and the site's overview."""

from __future__ import annotations

from archviz.code.pins import RevisionKind

PART_TITLES = {"text": "text model", "vision": "vision tower", "projector": "multimodal projector"}
"""How the totals name each part of a model with an image encoder."""

REVISION_NOTES = {
    RevisionKind.HUB: "Hub commit",
    RevisionKind.GIT: "git commit",
    RevisionKind.PACKAGE_VERSION: "release",
    RevisionKind.CONTENT_HASH: "content hash; no Hub revision is known",
}
"""What a file's pin is, said beside it (the site's revision links, the model card's sources): a content hash is no
commit."""
