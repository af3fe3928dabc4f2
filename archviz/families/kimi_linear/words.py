"""What the kimi_linear family says: its nodes' titles, summaries and claims, and its config sentence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from archviz.families.blocks.config_words import Getter
from archviz.families.blocks.mlp import ACTIVATION_CLAIM
from archviz.families.blocks.node_words import Words, WordsTable
from archviz.families.deepseek_v3.words import WORDS as DEEPSEEK_V3_WORDS
from archviz.families.kimi_linear.schema import KDA_KEYS, K
from archviz.graph.nodes import Mixer


def _kda_detail(values: Mapping[str, Any], get: Getter) -> str:
    """KDA's heads and head width, from ``linear_attn_config``."""
    linear = values.get(K.linear_attn_config.name)
    if (
        isinstance(linear, Mapping)
        and isinstance(linear.get(KDA_KEYS.num_heads.name), int)
        and isinstance(linear.get(KDA_KEYS.head_dim.name), int)
    ):
        get(K.linear_attn_config.name)
        return f" ({linear[KDA_KEYS.num_heads.name]} heads of {linear[KDA_KEYS.head_dim.name]})"
    return ""


def _positions(values: Mapping[str, Any], get: Getter) -> str | None:
    """NoPE: with ``mla_use_nope`` the MLA layers rotate nothing (and the KDA layers never do)."""
    if values.get(K.mla_use_nope.name) is True:
        get(K.mla_use_nope.name)
        return "no rotary position in MLA (NoPE)"
    return None


WORDS = replace(DEEPSEEK_V3_WORDS, mixer_details={Mixer.KDA: _kda_detail}, positions=_positions)
"""What Kimi Linear's own keys add to the sentence describing a released configuration."""


def _kda_projection(what: str) -> Words:
    return Words(
        title=f"KDA {what} projection",
        summary=f"Project each position to every KDA head's {what}.",
        claim=f"The KDA {what} projection maps each position to every KDA head's {what}.",
    )


NODE_WORDS = WordsTable(
    {
        "q-proj": _kda_projection("query"),
        "k-proj": _kda_projection("key"),
        "v-proj": _kda_projection("value"),
        "output-gate": Words(
            title="Output gate projection",
            summary="A {rank} projection of each position to one gate per channel of the attention output.",
            claim="The output gate is a low-rank projection of each position to one gate per channel of the output.",
        ),
        "attention.output-gate": Words(
            title="Attention output gate",
            summary=(
                "Project each position to one gate per head channel, squash it with a sigmoid and multiply the "
                "attention output by it."
            ),
        ),
        "kda": Words(
            title="Kimi Delta Attention",
            summary=(
                "Linear attention with a fixed-size recurrent state per head: short causal convolutions on "
                "queries, keys and values, a per-channel forget gate and a delta-rule update, then a gated "
                "RMSNorm and an output projection."
            ),
            claim=(
                "Kimi Delta Attention keeps a fixed-size state per head: short convolutions on queries, keys and "
                "values, a per-channel forget gate, a delta-rule update weighted by β, then a gated RMSNorm and "
                "an output projection."
            ),
        ),
        "short-conv": Words(
            title="Short causal convolution",
            summary=(
                "Mix each channel of the queries, keys and values with its last few positions (a depthwise "
                "causal convolution) and apply SiLU; the last positions are cached for decode."
            ),
            claim=(
                "A short depthwise causal convolution mixes each query, key and value channel with its last few "
                "positions, then applies the activation."
            ),
        ),
        "conv-state": Words(
            title="Convolution state",
            summary=f"The last {KDA_KEYS.short_conv_kernel_size} positions of queries, keys and values, cached for "
            "decode.",
            claim="The convolution state caches the last positions of the queries, keys and values for decode.",
        ),
        "qkv-split": Words(
            title="Query / key / value split",
            summary="Split the convolved channels back into queries, keys and values, one vector per head.",
            claim="The convolved channels are split back into queries, keys and values and viewed per head.",
        ),
        "forget-gate": Words(
            title="Forget gate",
            summary=(
                "Compute a per-channel decay: a low-rank projection plus dt_bias through softplus, scaled by "
                "−exp(A_log) per head (the log of how much of the state each channel keeps)."
            ),
            claim=(
                "The forget gate computes a per-channel decay: a low-rank projection plus dt_bias through "
                "softplus, scaled by −exp(A_log) per head."
            ),
        ),
        "beta": Words(
            title="Update strength β",
            summary="Project each position to one write strength per head, squashed to (0, 1) by a sigmoid.",
            claim="The update strength β is the sigmoid of one projection per head.",
        ),
        "delta-rule": Words(
            title="Gated delta-rule recurrence",
            summary=(
                "L2-normalize queries and keys, decay the state per channel, write each value against what the "
                "state already predicts for its key (the delta rule, weighted by β), and read the state with the "
                "query; chunked for prefill, one step at a time for decode."
            ),
            claim=(
                "The gated delta rule decays the state per channel, writes each value against what the state "
                "predicts for its key, weighted by β, and reads the state with the query."
            ),
        ),
        "recurrent-state": Words(
            title="Recurrent state",
            summary=(
                "The layer's memory, a key × value matrix per head kept in float32: what a KDA layer caches "
                "instead of keys and values, the same size at every context length."
            ),
            claim="The recurrent state is each head's key × value memory, carried between steps in the cache.",
        ),
        "gated-norm": Words(
            title="Gated RMSNorm",
            summary=(
                "Normalize each head's output in float32, rescale it, and multiply by the sigmoid of the output gate."
            ),
            claim=(
                "The gated RMSNorm normalizes each head's output, rescales it and multiplies it by the sigmoid "
                "of the output gate."
            ),
        ),
        "o-proj": Words(
            title="KDA output projection",
            summary="Flatten the gated head outputs of each position and project them back to the model width.",
            claim="The KDA output projection maps the gated head outputs back to the model width.",
        ),
        "output": Words(
            title="KDA output",
            summary="What KDA adds to the residual stream.",
            claim="The KDA output is the projected result that the block adds to its residual stream.",
        ),
    }
)
"""The words of this module's nodes, by the id its steps pass."""

SITU_WORDS = WordsTable(
    {
        "act": Words(
            title="SiTU activation",
            summary="Softly bound both halves and multiply them: gate' = β·tanh(gate/β)·sigmoid(gate) and "
            "up' = β₂·tanh(up/β₂), then gate' × up', element by element.",
            claim=ACTIVATION_CLAIM,
        ),
    }
)
"""The words of Kimi-K3's gated activation, the dense MLP's ``act`` when ``hidden_act`` is ``situ``."""


def _before(sublayer: str, where: str) -> dict[str, Words]:
    """Block Attention Residuals' words before one sublayer (``attention``, ``mlp``)."""
    return {
        f"attn-res.{sublayer}-norm": Words(
            title=f"AttnRes RMSNorm before {where}",
            summary="Normalize every source of the block history before it is scored.",
        ),
        f"attn-res.{sublayer}-query": Words(
            title=f"AttnRes pseudo-query before {where}",
            summary="Score each normalized source with one learned d → 1 projection.",
        ),
        f"attn-res.{sublayer}-mix": Words(
            title=f"AttnRes mix before {where}",
            summary=f"Softmax the scores over the sources and take the weighted sum as the input to {where}.",
        ),
    }


ATTN_RES_WORDS = WordsTable(
    {
        "attn-res.history": Words(
            title="Block history",
            summary="The outputs of the completed blocks of {block_size} layers and the current block's partial sum, "
            "the sources Block Attention Residuals attend over (at most {sources} in this model).",
        ),
        **_before("attention", "attention"),
        **_before("mlp", "the MLP"),
    }
)
"""The words of Kimi-K3's Block Attention Residuals (no modeling file has them, so no claims), by their id in a
block."""
