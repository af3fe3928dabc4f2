"""The provenance stage: which modeling file to cite, each node's locator run through the AST engine
(``archviz.code.finder``), the evidence and citations (``sources``), and the sentences composed from the config and
the graph (``claims``).

May import the stages before it (common, graph, code, inputs, the transformers adapter's source-text readers, families);
never torch or transformers.
"""
