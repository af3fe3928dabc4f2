"""The typed operator graph as plain, frozen data: nodes, tensor states and their placement (``nodes``), symbolic shapes
(``shapes``), the one naming map between checkpoint names and module paths, its renames read from transformers' own
conversion mapping by the adapter (``naming``; ``archviz.transformers.renames``), parameter totals and the predicted
checkpoint (``totals``), and the roles every family shares (``roles``).

May import ``common`` and ``code``; never torch or transformers.
"""
