"""Comparing two models: two ``ModelDocs`` → a ``ModelDiff`` (``compare``): config keys, nodes, the shared roles,
layer maps and totals, as typed data that presentation puts in words.

May import every stage before it; never torch or transformers.
"""
