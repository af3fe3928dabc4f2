"""Modeling source read without running it: a file and the revision that pins it (``pins``), where a node's code is,
as data (``locators``), the AST engine that finds the statements a locator names (``finder``), excerpts and links of
the lines it finds (``excerpts``), and the plain-data module tree the meta stage hands over (``modeltree``).

May import ``common`` only; never torch or transformers.
"""
