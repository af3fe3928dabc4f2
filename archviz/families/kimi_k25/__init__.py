"""The kimi_k25 family: Kimi-K2.5, Kimi-K2's text model wrapped with a vision tower and a multimodal projector.

The text model is Kimi-K2's, built by the deepseek_v3 family's own builder from ``text_config``: its node ids,
counts and provenance are K2's (cited in its own modeling file, ``Locator.file = "text"``), only its checkpoint names
move under the wrapper's ``language_model.`` prefix. Beside it, before the token embedding, this family builds the
vision tower (a patch convolution, a learned position grid, a 2-D rotary embedding, pre-norm encoder layers of
bidirectional attention and a GELU MLP, a final LayerNorm, the 2×2 patch merge) and the projector (LayerNorm, linear,
GELU, linear) that maps merged patches to the text model's width. Vision shapes have their own symbols: ``P`` patches,
``M`` image tokens, ``I`` images.

Sources: transformers ``models/kimi_k25/modeling_kimi_k25.py`` and ``configuration_kimi_k25.py`` (5.24: the module
tree and every shape; ``Kimi_K25VisionConfig``'s keys and defaults); the released ``config.json``, whose vision keys are
spelled as Moonshot's own code reads them (``vt_hidden_size``, ``init_pos_emb_height``, ``mm_hidden_size``); the
checkpoint names are the release's, which transformers' ``kimi_k25`` conversion mapping loads with no key missing or
left over (``vision_tower.encoder.blocks.{i}.wqkv``, ``mm_projector.proj.0``, ``language_model.model.layers.{i}``).
"""
