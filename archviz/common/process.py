"""Settings of an archviz process: its own command line's, and each worker process ``render --jobs`` starts."""

from __future__ import annotations

import gc

GC_THRESHOLDS = (50_000, 20, 10)
"""The cyclic garbage collector's thresholds in an archviz process (Python's are 700, 10, 10). A command builds
hundreds of thousands of short-lived objects (a model on the meta device, a graph, a site) in a process that holds
millions more (torch, transformers): at Python's thresholds a full collection runs every few seconds and walks them
all. ``check`` of a two-layer DeepSeek-V3 config took 4.3 s at Python's thresholds and 3.9 s with the collector
switched off; what a command computes does not depend on when cycles are freed, and the garbage between two
collections stays small."""


def collect_less() -> None:
    """Set this process's collector to ``GC_THRESHOLDS``."""
    gc.set_threshold(*GC_THRESHOLDS)
