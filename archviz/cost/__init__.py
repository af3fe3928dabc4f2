"""What a graph costs to run, read off the graph alone: FLOP terms per node, weight, cache and state bytes
(``model``), and deployment sizing, the predicted checkpoint split over GPUs (``plan``).

May import the stages before it up to the pipeline; never torch or transformers.
"""
