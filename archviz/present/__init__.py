"""Presentation: how archviz says a typed value, for the terminal, JSON, Markdown and the site alike.

What it owns:

- ``numbers``: numbers and units as text (counts ``4,096``, rounded counts ``1.03 T``, bytes ``14.03 GB = 13.07 GiB``,
  FLOPs, shares, layer ranges ``layers 1–60``, a placement's instances, ratios ``×1.5`` and signed differences), a
  setting's typed value as text, and a compared or configured value as text. Values stay typed (ints, floats, flags,
  units) in the graph and the comparison; they become text here.
- ``labels``: the names the views give to parts of a model (``text model``, ``vision tower``).
- ``json_documents``: the ``inspect --json``, ``check --json`` and ``diff --json`` documents; ``documents``: the JSON
  documents as the commands, the exports and the site publish them, and their schemas.
- ``diff_words`` and ``check_words``: the comparison of two models and the verification's verdict in sentences.
- the terminal views: the graph tree and the check report (``report``), the diff (``diff_report``), the cost
  (``costs_report``) and the deployment plan (``plan_report``), over consoles that write no control sequence
  (``terminal``); JUnit XML (``junit``).
- Markdown: the model-card section (``card``, ``markdown``), the Mermaid diagram (``mermaid``) and the exports
  (``export``).

What it may import: ``numbers`` and ``labels`` only the graph's plain data and ``archviz.common``, so that every stage
that words a sentence (a claim, a setting, a check's finding) says a number the same way (``tests/cli/test_layering.py``
places them just after the graph); the rest read every stage before presentation, and share the site's data flow and
formatting (``archviz.site`` is presentation's other half). Never torch or transformers.
"""
