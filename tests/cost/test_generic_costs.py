"""The generic path's costs against torch and transformers, counted here apart from archviz.

Issue 21, item 4. ``archviz cost --prompt 128 --context 256 --batch 1 --json`` on a model no family is written for
must give the FLOPs torch's ``FlopCounterMode`` counts over transformers' own forward at those sizes (routed experts
top-k, as the ``batched_mm`` experts kernel runs them) and the cache bytes transformers' cache object holds. The
witness below builds the class the config names on the meta device, runs a prefill of T tokens, fills a cache with S
positions and decodes one token, each counted on its own, and then sums every tensor the cache holds: the cost's
cache at S + 1 positions. None of it goes through archviz.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from archviz.cli import app
from tests.generic.test_generic_moe import RELEASED, RELEASED_FOLDER, TINY, folder_for

runner = CliRunner()
BATCH, PROMPT, CONTEXT = 1, 128, 256


def cost_json(folder: Path, *, context: int = CONTEXT, prompt: int = PROMPT) -> dict[str, Any]:
    arguments = ["cost", str(folder), "--prompt", str(prompt), "--context", str(context), "--batch", str(BATCH)]
    result = runner.invoke(app, [*arguments, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def witnessed(folder: Path, *, prompt: int = PROMPT, context: int = CONTEXT) -> tuple[int, int, int]:
    """Prefill FLOPs, decode FLOPs and the bytes the cache holds after the decode step, from torch and transformers."""
    import transformers
    from transformers import DynamicCache

    config = transformers.AutoConfig.from_pretrained(folder)
    # The text weights' dtype, which the cache is kept in; BF16 where the config declares none (gpt-oss), as
    # archviz assumes and says.
    dtype = config.get_text_config().dtype or config.dtype or torch.bfloat16
    with torch.device("meta"):
        model = getattr(transformers, config.architectures[0])._from_config(config, dtype=dtype).eval()
    if model._can_set_experts_implementation():
        model.set_experts_implementation("batched_mm")  # runs on meta tensors and counts each token's top-k

    def tokens(length: int) -> torch.Tensor:
        return torch.zeros((BATCH, length), dtype=torch.long, device="meta")

    # The cache class the model's modeling file defines, if it defines one (MiniMax's model accepts no other).
    modeling = sys.modules[type(model).__module__]
    own = [
        kind
        for kind in vars(modeling).values()
        if isinstance(kind, type) and issubclass(kind, DynamicCache) and kind.__module__ == modeling.__name__
    ]

    def empty() -> DynamicCache:
        return own[0]() if own else DynamicCache(config=model.config)

    with torch.no_grad():
        # Each pass starts from an empty cache of the model's own kind: without one, transformers checks the position
        # ids' values for packed sequences (Gemma-4 builds its masks first), values meta tensors do not have.
        with FlopCounterMode(display=False) as prefill:
            model(input_ids=tokens(prompt), past_key_values=empty(), use_cache=True)
        cache = empty()
        model(input_ids=tokens(context), past_key_values=cache, use_cache=True)
        with FlopCounterMode(display=False) as decode:
            model(input_ids=tokens(1), use_cache=True, past_key_values=cache)
    held = 0
    for layer in cache.layers:
        # Keys, values and a sparse layer's index keys; a linear-attention layer's states are dicts.
        tensors = [getattr(layer, name, None) for name in ("keys", "values", "idx_keys")]
        for name in ("conv_states", "recurrent_states"):
            tensors += list((getattr(layer, name, None) or {}).values())
        held += sum(math.prod(t.shape) * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    # MiniMax's cache keeps each lightning attention layer's state beside its layers.
    held += sum(
        math.prod(t.shape) * t.element_size() for t in getattr(cache, "linear_cache", []) if isinstance(t, torch.Tensor)
    )
    return prefill.get_total_flops(), decode.get_total_flops(), held


@pytest.mark.parametrize("name", sorted(TINY))
def test_generic_costs_are_what_torch_counts_and_the_cache_holds(name: str, tmp_path: Path) -> None:
    assert_costs_witnessed(folder_for(TINY[name].config(), tmp_path))


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_released_generic_costs_are_what_torch_counts_and_the_cache_holds(name: str) -> None:
    """The released configs at full size (every layer, every expert) on the meta device."""
    assert_costs_witnessed(RELEASED_FOLDER / name)


def assert_costs_witnessed(folder: Path) -> None:
    document = cost_json(folder)
    assert document["flops"] is not None, document.get("not_priced")
    prefill, decode, held = witnessed(folder)
    assert (document["flops"]["prefill"], document["flops"]["decode"]) == (prefill, decode)
    # The witness's cache holds S + 1 positions after the decode step.
    assert cost_json(folder, context=CONTEXT + 1)["cache"]["bytes_at_context"] == held


@pytest.mark.parametrize("name", sorted(TINY))
def test_check_witnesses_generic_costs_with_the_flop_count_and_the_cache_object(name: str, tmp_path: Path) -> None:
    """`archviz check` runs both cost legs on each architecture (Gemma-4's included, whose masks are built before its
    cache) and they agree; they are the only legs independent of the graph, and the report says so."""
    folder = folder_for(TINY[name].config(), tmp_path)
    result = runner.invoke(app, ["check", str(folder), "--json"])
    report = json.loads(result.stdout)
    legs = {leg["name"]: leg for leg in report["legs"]}
    assert result.exit_code in (0, 3) and report["outcome"] in ("agree", "partial"), result.stdout[-2000:]
    assert legs["FLOP count"]["status"] == legs["cache object"]["status"] == "ran"
    independent = {
        name for name, leg in legs.items() if leg["status"] == "ran" and "analytic graph" in leg["independent_of"]
    }
    assert independent == {"FLOP count", "cache object"}
