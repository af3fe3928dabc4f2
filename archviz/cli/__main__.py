"""``python -m archviz.cli ARGS`` is ``archviz ARGS``."""

from __future__ import annotations

from archviz.cli import main

main()
