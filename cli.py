"""Run archviz from a checkout without installing it: ``python cli.py ARGS`` is ``archviz ARGS``.

The command line itself is ``archviz.cli``; installed, it is the ``archviz`` console script and
``python -m archviz``. The wheel ships no top-level ``cli`` module.
"""

from __future__ import annotations

from archviz.cli import main

if __name__ == "__main__":
    main()
