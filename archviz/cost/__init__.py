"""What a graph costs to run, read off the graph alone, and deployment sizing: the predicted checkpoint split over GPUs.

The cost model: FLOP terms and the sizes they are evaluated at (``terms``), the pricers that write each operator kind's
terms (``pricers``), routed experts as one value (``experts``), the weights' bytes stored and read by a decode step
(``weights``), cache and state bytes (``cache``), the whole model's report (``report``). Deployment sizing: the GPU
table (``gpus``, its figures in ``gpus.toml``), a model's parallel plans and what each style splits
(``parallel_plans``; transformers' plans restated for a hand-written family are in its folder, ``plans.py``),
a manifest's tensors grouped as the plans see them (``tensor_names``; each name read by the graph's naming map), each
tensor's split and each rank's tensors (``sharding``), each rank's cache and roofline figures (``roofline``), the plan
itself (``plan``: facts, which ``archviz.present.plan_words`` words).

May import the stages before it up to the pipeline; never torch or transformers.
"""

MAX_POSITIONS = 2**32
"""Most positions a prompt or a context may have (4,294,967,296: a thousand times the longest context released);
the command line's ``--prompt`` and ``--context`` and ``Model.cost`` refuse more."""
MAX_BATCH = 2**20
"""Most sequences a batch may have (``--batch``, ``Model.cost(batch=)``)."""
