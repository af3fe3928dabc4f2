"""Where a model is and what its config says: a model argument → its folder, config file, Hub repo and revision
(``resolve``); the parsed config with each key's line span (``config``); typed, validated reads with the user's
assumptions and the declared dtype (``settings``); what transformers is asked to build from the same file
(``recipe``).

May import ``common``, ``code`` and ``graph``; never torch or transformers.
"""
