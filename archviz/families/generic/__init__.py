"""Any model_type transformers ships without a hand-written table: the graph read off the real modeling code.

The model is built on torch's meta device by the meta stage, which hands over its module tree as plain data
(``archviz.code.modeltree.ModuleTree``, read by ``archviz.transformers.module_tree.read_model_code``); this package
walks that record: every module that owns parameters or saved buffers becomes a learned node whose rows are its
tensors, named as ``save_pretrained`` writes them (transformers' own weight-conversion reversal, run on that module's
tensors alone, so fused experts come back one tensor per expert). Repeated layers are folded: modules at the
same path in every item of a ``ModuleList`` (``model.layers.{layer}``) with the same class and the same
tensors become one node with a layer placement, and a module whose checkpoint tensors repeat per expert
(``experts.{expert}.w1.weight``) one node with ``{expert}`` instances. Output shapes come from a prefill and a
decode pass on meta tensors (``archviz.code.modeltree.ShapeTrace``); nodes are in the order the forward pass left them.

A fixed size (a tensor's axis, a traced width) is named after what structurally sizes it, never after a config key
that merely has the same value (``sizes.size_dim``): the candidates are read off the built module and the modules
holding it, nearest first, up to the nearest that holds a config — each one's integer attributes (an attention
module's ``head_dim``, an MLP's ``intermediate_size``, the experts' ``intermediate_dim``), a head count times a head
size of them, then the keys of its config that its role is sized by (an attention module's
``num_key_value_heads``, ``head_dim``…: ``ATTENTION_CONFIG_KEYS``; a model's ``hidden_size`` and ``vocab_size``)
and their head products. The first tier where any candidate has the value decides; two candidates there, or none
anywhere, leave the size a plain number. Each named size's ``Dim.formula`` says where it was read
(``Qwen3_5MoeMLP.intermediate_size``, ``num_key_value_heads × head_dim``). A node is titled by its place and role,
then its class (``vision tower · encoder · layer · attention · q proj · linear (Linear)``: ``words.node_title``),
unique in the graph; a module whose kind archviz does not recognise says so in its summary.

Such a graph describes the code with the code, so it is not an independent witness: ``Graph.not_modelled``
says so (``Graph.derived_from_code``). This package imports neither torch, transformers nor the modules of the
transformers adapter that import them: ``build`` asks the code reader it is handed (the pipeline's) for the model
it needs.

The modules, one concept each: ``builder`` (the family, ``build`` and the order the graph is built in) over the shared
state of one reading (``reading``); the module tree and its folding into nodes (``tree``); what a module is from its
names (``roles``); sizes and traced shapes (``sizes``); ids, titles and summaries (``words``); each folded module's
node and group (``nodes``); attention's cores (``attention``, with multi-head latent attention read off the built
module in ``latent_attention``); recurrent mixers and the sparse-attention indexer (``mixers``); banks of routed
experts and their routing (``experts``); the layer map (``layers``); the data flow (``flow``); the notes on what is
not known (``notes``); the counts past which a config is refused (``bounds``); and the locators the provenance stage
makes per graph (``locate``).
"""

from archviz.families.generic.builder import NAME, build, family
from archviz.families.generic.locate import locators

__all__ = ["NAME", "build", "family", "locators"]
