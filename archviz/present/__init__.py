"""Presentation: how archviz says a value, for the terminal views and the site alike.

What it owns:

- ``numbers``: numbers and units as text (counts ``4,096``, rounded counts ``1.03 T``, bytes ``14.03 GB = 13.07 GiB``,
  FLOPs, shares, layer ranges ``layers 1–60``, a placement's instances, ratios ``×1.5`` and signed differences), a
  setting's typed value as text, and a compared or configured value as text. Values stay typed (ints, floats, flags,
  units) in the graph and the comparison; they become text here.
- ``labels``: the names the views give to parts of a model (``text model``, ``vision tower``).
- ``json_documents``: the ``inspect --json``, ``check --json`` and ``diff --json`` documents, which state the same
  values in the same words the terminal views (``archviz.report``, ``archviz.diff_report``) and the site's pages
  (``archviz.site``) do.
- ``diff_words``: the comparison of two models in sentences (``archviz.diff`` computes the typed comparison).
- ``check_words``: the verification's verdict in one sentence (``archviz.verify`` computes the verification).

What it may import: ``numbers`` and ``labels`` only the plain data of the graph (``archviz.graph``) and the shared
rules of wording (``archviz.words``), so that every stage that words a sentence (a claim, a setting, a check's
finding) says a number the same way; the other modules read the stages before presentation (the graph, its totals
and sources, the verification, the comparison), never the terminal views, the site or the command line.
"""
