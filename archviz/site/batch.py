"""Rendering a site for many models: describe each, verify them in parallel processes, publish once.

The pipeline runs in turn for each model (describe, then verify, then render), and what a run reports as it goes
is told to a ``Reporter`` (the command line shows it as a progress display on a terminal). Verification, the slow
part (transformers' model on the meta device, the checkpoint's headers), runs in ``jobs`` worker processes, first;
each worker describes its model (leaving its reading of the code in the description cache, from which this process
then describes it) and returns its verification sentence and node statuses, used in the models' order, so the site
is byte-identical whatever ``jobs`` is. Workers are spawned, not forked: the
parent may run a progress thread, and torch is imported only in the workers.
"""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from archviz.common.errors import InputError
from archviz.common.process import collect_less
from archviz.gallery import GalleryEntry
from archviz.pipeline import ModelDocs, describe_model
from archviz.site.index import ModelContext, model_context
from archviz.site.publish import write_site

CheckpointLocator = Callable[[ModelDocs, str | None], str | None]
"""A model's checkpoint location (a Hub repo id, a folder), or None when it has none; passed by the caller."""


class Reporter(Protocol):
    """What a render tells as it goes."""

    def stage(self, model: str, stage: str) -> None:
        """``model`` entered ``stage`` (``describe``, ``verify``, ``render``) or finished it (``done``)."""

    def wrote(self, path: str) -> None:
        """A file of the site was written (relative path)."""

    def waiting(self, message: str) -> None:
        """The render waits for another one writing the same folder."""


class QuietReporter:
    """Tells nothing (a render whose standard error is not a terminal, or a test)."""

    def stage(self, model: str, stage: str) -> None:
        """Nothing."""

    def wrote(self, path: str) -> None:
        """Nothing."""

    def waiting(self, message: str) -> None:
        """Nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderRequest:
    """One ``archviz render``: which models, where, and how."""

    names: tuple[str, ...]
    """Models as the user named them."""
    out: Path
    """The site folder."""
    template_dir: Path | None = None
    """Templates searched before the built-in ones."""
    force: bool = False
    """Replace ``out`` even if it is not an archviz site."""
    verify: bool = True
    """Run the meta-model and checkpoint verification."""
    trust_remote_code: bool = False
    """Allow importing a model folder's own modeling code."""
    source: str = "auto"
    """Which modeling file to cite."""
    jobs: int = 1
    """Worker processes for verification; 1 verifies in this process."""
    wait: bool = True
    """Wait for another render into ``out`` to finish, instead of failing."""
    compare: tuple[tuple[str, str], ...] | None = None
    """Pairs of models that get a compare page (as named or by folder name); None: the models of each family
    pairwise when the family has few."""
    gallery: tuple[GalleryEntry, ...] | None = None
    """The gallery's entries, whose folders ``names`` are, in the same order: the home page is the gallery's."""


def default_jobs() -> int:
    """The machine's cores."""
    return max(1, os.cpu_count() or 1)


def verification_for(name: str, source: str, trust_remote_code: bool, locate: CheckpointLocator) -> ModelContext:
    """The verification sentence and node statuses of one model (run in a worker: the model is described again
    there)."""
    from archviz.verify.check import verify
    from archviz.verify.checkpoint import read_checkpoint

    docs = describe_model(name, source=source)
    location = locate(docs, None)
    held = read_checkpoint(location) if location is not None else None
    return model_context(verify(docs, checkpoint=held, trust_remote_code=trust_remote_code))


def _worker(
    name: str, source: str, trust_remote_code: bool, locate: CheckpointLocator, verify: bool
) -> tuple[ModelContext | None, str, str]:
    """A worker's result: (context, "", "") or (None, message, path), an ``InputError`` sent back as text (its
    keyword-only constructor does not survive pickling). It describes the model (which leaves its reading of the code
    in the description cache) and, with ``verify``, verifies it; without, the context is empty."""
    try:
        if verify:
            return verification_for(name, source, trust_remote_code, locate), "", ""
        describe_model(name, source=source)
        return ModelContext(), "", ""
    except InputError as error:
        return None, error.message, error.location.path


def _in_workers(request: RenderRequest, locate: CheckpointLocator, reporter: Reporter) -> list[ModelContext]:
    """Every model described, and verified when the request says so, in ``jobs`` worker processes, in the models'
    order; an input error is raised as describing the model here would raise it."""
    work = functools.partial(
        _worker,
        source=request.source,
        trust_remote_code=request.trust_remote_code,
        locate=locate,
        verify=request.verify,
    )
    context = multiprocessing.get_context("spawn")
    workers = min(request.jobs, len(request.names))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=collect_less) as pool:
        futures = [pool.submit(work, name) for name in request.names]
        for name in request.names:
            reporter.stage(name, "verify" if request.verify else "describe")
        results = [future.result() for future in futures]
    contexts = []
    for result, message, path in results:
        if result is None:
            raise InputError(message, path=path)
        contexts.append(result)
    return contexts


def render_site(request: RenderRequest, *, locate: CheckpointLocator, reporter: Reporter | None = None) -> int:
    """Describe, verify and publish the site of ``request``; returns how many models it holds.

    With more than one job and more than one model, the workers run first: each describes its model (a gallery's
    dozens of models read off the code at once) and verifies it when asked, so that describing them here reads each
    from the description cache. Without verification, only a gallery is worth the workers' start."""
    reporter = reporter or QuietReporter()
    names = request.names
    pooled = request.jobs > 1 and len(names) > 1 and (request.verify or request.gallery is not None)
    contexts = _in_workers(request, locate, reporter) if pooled else None
    described = []
    for name in names:
        reporter.stage(name, "describe")
        described.append(describe_model(name, source=request.source))
    if not request.verify:
        contexts = [ModelContext()] * len(described)
    elif contexts is None:
        contexts = []
        for name in names:
            reporter.stage(name, "verify")
            contexts.append(verification_for(name, request.source, request.trust_remote_code, locate))
    for name in names:
        reporter.stage(name, "render")
    write_site(
        described,
        request.out,
        template_dir=request.template_dir,
        force=request.force,
        contexts={docs.graph.model.name: context for docs, context in zip(described, contexts, strict=True)},
        compare=request.compare,
        gallery=request.gallery,
        wait=request.wait,
        on_wait=reporter.waiting,
        on_file=reporter.wrote,
    )
    for name in names:
        reporter.stage(name, "done")
    return len(described)
