"""What a graph costs to run, read off the graph alone: FLOP terms per node, weight, cache and state bytes
(``model``), and deployment sizing, the predicted checkpoint split over GPUs (``plan``).

May import the stages before it up to the pipeline; never torch or transformers.
"""

MAX_POSITIONS = 2**32
"""Most positions a prompt or a context may have (4,294,967,296: a thousand times the longest context released);
the command line's ``--prompt`` and ``--context`` and ``Model.cost`` refuse more."""
MAX_BATCH = 2**20
"""Most sequences a batch may have (``--batch``, ``Model.cost(batch=)``)."""
