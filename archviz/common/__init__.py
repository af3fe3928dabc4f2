"""What every stage uses: the typed input error, bounded file reads and atomic writes, config regexes matched in
bounded time, counting in words, dtype names and sizes, the installed versions.

Imports nothing of archviz but itself; never torch or transformers.
"""
