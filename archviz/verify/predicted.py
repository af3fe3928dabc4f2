"""A model's checkpoint as ``check`` finds it: the safetensors beside its config, or the one its graph predicts
(``archviz manifest --predicted``), bounded in size."""

from __future__ import annotations

from pathlib import Path

from archviz.common.errors import InputError
from archviz.graph.nodes import TensorRow
from archviz.graph.totals import ManifestTensor, predicted_manifest
from archviz.pipeline import ModelDocs
from archviz.verify.headers import PREDICTED_PREFIX, Checkpoint, CheckpointTensor


def find_local_checkpoint(folder: Path | None) -> str | None:
    """A model folder's own safetensors, when it has any."""
    if folder is None:
        return None
    if (folder / "model.safetensors.index.json").is_file() or any(folder.glob("*.safetensors")):
        return str(folder)
    return None


def checkpoint_location(docs: ModelDocs, checkpoint: str | None) -> str | None:
    """The checkpoint to check: the one given, else the Hub repo's (HF cache first), else the model folder's own
    safetensors; None when there is none."""
    if checkpoint is not None:
        return checkpoint
    if docs.source.repo is not None and not docs.source.bundled:
        return docs.source.repo
    return find_local_checkpoint(docs.source.folder)


MAX_PREDICTED_TENSORS = 5_000_000
"""More checkpoint tensors than any released model has (Kimi-K2: about 140,000); a config asking for more is an
input error, not a reason to fill memory."""


def _stored_count(row: TensorRow) -> int:
    """Tensors one instance of a row is stored as."""
    if row.packed is not None:
        return len(row.packed.stored)
    return 2 if row.scale_block else 1


def bounded_manifest(docs: ModelDocs) -> list[ManifestTensor]:
    """The predicted checkpoint, refusing configs that would predict an absurd number of tensors."""
    count = sum(
        node.placement.count * (len(node.buffers) + sum(_stored_count(row) for row in node.parameters))
        for node in docs.graph.nodes
    )
    if count > MAX_PREDICTED_TENSORS:
        raise InputError(
            f"the config predicts {count:,} checkpoint tensors, more than archviz expands "
            f"({MAX_PREDICTED_TENSORS:,}); check the expert and layer counts",
            path=docs.source.display_path,
        )
    return predicted_manifest(docs.graph)


def predicted_checkpoint(docs: ModelDocs) -> Checkpoint:
    """The graph's predicted checkpoint, as a manifest can hold it; its metadata names every value the graph
    assumed (``archviz.assumed.dtype``: the dtype and where it comes from), since the dtypes and shapes depend on
    them."""
    tensors = tuple(
        CheckpointTensor(name=tensor.name, shape=tensor.shape, dtype=tensor.dtype, file="predicted")
        for tensor in bounded_manifest(docs)
    )
    return Checkpoint(
        source=f"{PREDICTED_PREFIX}{docs.graph.model.name}",
        revision=docs.graph.model.revision,
        tensors=tensors,
        metadata={f"archviz.assumed.{item.key}": f"{item.value} ({item.source})" for item in docs.graph.assumptions},
    )
