"""The memory a serving engine leaves for the weights and the cache on each GPU, term by term, as the engine's own code
computes it at startup.

- **vLLM** (0.11.0, ``vllm/v1/worker/gpu_worker.py``, ``Worker.determine_available_memory``; ``vllm/utils``,
  ``memory_profiling``): it asks for ``gpu_memory_utilization`` (0.9) of the device total CUDA reports
  (``torch.cuda.mem_get_info``), and the cache gets what is left of that once the weights, the peak of a profile run
  and the memory allocated outside torch are taken out. The profile run (``GPUModelRunner.profile_run``) is one forward
  of ``max_num_batched_tokens`` tokens (T: 8,192 on a GPU of 70 GiB or more other than the A100, else 2,048) over
  ``R = min(max_num_seqs, T)`` dummy requests (``max_num_seqs`` 1,024, or 256), then the sampler on one row of logits
  per request, every TP rank holding the whole vocabulary: its peak is about 38 bytes per logit with torch's own
  top-k/top-p sort (the logits in bfloat16 and float32, the sort's values, indices, inverse indices and scratch), plus
  the hidden states (``T·H + 2·R·H`` elements in bfloat16) and cuBLAS's workspace (32 MiB). CUDA graphs are captured
  after the cache is allocated, in what the fraction leaves: they are not taken from it.
- **SGLang** (0.5.3 and later, ``python/sglang/srt/server_args.py``, ``_handle_gpu_memory_settings``;
  ``model_runner``, ``profile_max_num_token``): the weights and the cache share ``mem_fraction_static`` of the memory
  free before the weights load; its default keeps back, in MiB of nvidia-smi's total, 512 + 1.5 × the chunked-prefill
  size + 2 × the largest CUDA-graph batch + 1,024 × tp/8, at least 10 GiB on a GPU over 60 GiB.
- **none**: a flat share of the memory kept back (``--reserve``), the weights and the cache in the rest.

Held to engines' published startup logs in ``tests/cost/test_engine_memory.py`` (the README's calibration table).

This module must not import torch or transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from archviz.cost.gpus import Gpu

GIB = 2**30
MIB = 2**20


class Engine(StrEnum):
    """Whose startup arithmetic sizes the cache."""

    VLLM = "vllm"
    SGLANG = "sglang"
    NONE = "none"


VLLM_VERSION = "vLLM 0.11.0"
VLLM_SOURCE = (
    "vllm/v1/worker/gpu_worker.py (determine_available_memory) and vllm/v1/worker/gpu_model_runner.py (profile_run, "
    "_dummy_sampler_run) at vLLM 0.11.0"
)
SGLANG_VERSION = "SGLang 0.5.3"
SGLANG_SOURCE = (
    "python/sglang/srt/server_args.py (_handle_gpu_memory_settings) and model_executor/model_runner.py "
    "(profile_max_num_token) at SGLang 0.5.3"
)

VLLM_UTILIZATION = 0.9
"""vLLM's default ``gpu_memory_utilization``."""
SAMPLER_BYTES_PER_LOGIT = 38
"""Peak bytes of vLLM's dummy sampler run per logit with torch's own top-k/top-p (bfloat16 2, float32 4, the sort's
values and indices 12, inverse indices 8, scratch 12)."""
CUBLAS_WORKSPACE = 32 * MIB
NON_TORCH = {1: 0.13, 2: 0.54}
"""Memory vLLM's profile finds allocated outside torch, GiB, as it logged it on H100s (one GPU; TP 2 and more, NCCL's
buffers with it): llm-d's benchmark logs (llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md)."""
SGLANG_INIT = {1: 0.6, 2: 1.96}
"""Memory in use before SGLang loads the weights, GiB: the CUDA context alone (one GPU), with NCCL's (TP 8 on H200:
"Init torch distributed ends. mem usage=1.96 GB", sgl-project/sglang#11716)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryTerm:
    """One term of the engine's arithmetic."""

    name: str
    bytes: int
    formula: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineMemory:
    """What an engine leaves each GPU for its weights and cache, and the terms that make it."""

    engine: Engine
    usable: int
    """Bytes for the weights and the cache on each GPU."""
    terms: tuple[MemoryTerm, ...]
    """The arithmetic, first the memory, then what is taken out."""
    source: str
    """Where the engine's code is (or what the flat share is)."""
    fraction: float
    """The engine's fraction (vLLM's ``gpu_memory_utilization``, SGLang's ``mem_fraction_static``; ``1 − reserve``)."""


def cuda_total(gpu: Gpu) -> tuple[int, str]:
    """The device total CUDA reports, and what it is: the logged figure where one is cited, else the table's."""
    if gpu.cuda_memory is not None:
        return gpu.cuda_memory, "the device total CUDA reports (torch.cuda.mem_get_info)"
    return gpu.memory, "the table's memory (no report of CUDA's total is cited for this GPU)"


def vllm_batch(gpu: Gpu) -> tuple[int, int]:
    """vLLM's ``vllm serve`` defaults of ``max_num_batched_tokens`` and ``max_num_seqs`` on ``gpu``
    (``EngineArgs._set_default_args``)."""
    if gpu.memory >= 70 * GIB and "a100" not in gpu.key:
        return 8192, 1024
    return 2048, 256


def vllm_memory(gpu: Gpu, *, vocab: int, hidden: int, gpus: int, fraction: float | None = None) -> EngineMemory:
    """What vLLM leaves each GPU for its weights and cache."""
    utilization = VLLM_UTILIZATION if fraction is None else fraction
    total, said = cuda_total(gpu)
    tokens, seqs = vllm_batch(gpu)
    requests = min(seqs, tokens)
    requested = int(total * utilization)
    sampler = SAMPLER_BYTES_PER_LOGIT * requests * vocab
    hidden_states = 2 * (tokens * hidden + 2 * requests * hidden)
    activation = sampler + hidden_states + CUBLAS_WORKSPACE
    non_torch = int(NON_TORCH[min(gpus, 2)] * GIB)
    terms = (
        MemoryTerm(name="device memory", bytes=total, formula=said),
        MemoryTerm(name="asked for", bytes=requested, formula=f"× gpu_memory_utilization {utilization:g}"),
        MemoryTerm(
            name="profile run's activation peak",
            bytes=-activation,
            formula=(
                f"{SAMPLER_BYTES_PER_LOGIT} B × {requests:,} requests × {vocab:,} vocabulary (the sampler's logits) + "
                f"2 B × ({tokens:,} tokens + 2 × {requests:,}) × {hidden:,} hidden + 32 MiB cuBLAS workspace"
            ),
        ),
        MemoryTerm(
            name="allocated outside torch",
            bytes=-non_torch,
            formula=f"{NON_TORCH[min(gpus, 2)]} GiB as vLLM logged it on {'one GPU' if gpus == 1 else 'TP 2 (NCCL)'}",
        ),
    )
    return EngineMemory(
        engine=Engine.VLLM,
        usable=requested - activation - non_torch,
        terms=terms,
        source=f"{VLLM_VERSION}: {VLLM_SOURCE}",
        fraction=utilization,
    )


def sglang_fraction(gpu: Gpu, tp: int) -> float:
    """SGLang's default ``mem_fraction_static`` on ``gpu`` at ``tp`` (``_handle_gpu_memory_settings``)."""
    mib = gpu.memory / MIB
    if mib < 20 * 1024:
        chunked, graphs = 2048, 8
    elif mib < 35 * 1024:
        chunked, graphs = 2048, 24 if tp < 4 else 80
    elif mib < 60 * 1024:
        chunked, graphs = 4096, 32 if tp < 4 else 160
    elif mib < 160 * 1024:
        chunked, graphs = 8192, 256 if tp < 4 else 512
    else:
        chunked, graphs = 16384, 512
    reserved = 512 + 1.5 * max(chunked, 2048) + 2 * graphs + tp / 8 * 1024
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mib - reserved) / mib, 3)


def sglang_memory(gpu: Gpu, *, tp: int, gpus: int, fraction: float | None = None) -> EngineMemory:
    """What SGLang leaves each GPU for its weights and cache."""
    static = sglang_fraction(gpu, tp) if fraction is None else fraction
    total, said = cuda_total(gpu)
    init = int(SGLANG_INIT[min(gpus, 2)] * GIB)
    free = total - init
    usable = int(free * static)
    terms = (
        MemoryTerm(name="device memory", bytes=total, formula=said),
        MemoryTerm(
            name="in use before the weights load",
            bytes=-init,
            formula="the CUDA context" if gpus == 1 else "the CUDA context and NCCL's buffers, as logged at TP 8",
        ),
        MemoryTerm(
            name="weights and cache",
            bytes=usable,
            formula=f"× mem_fraction_static {static:g}" + (" (its default here)" if fraction is None else ""),
        ),
    )
    return EngineMemory(
        engine=Engine.SGLANG, usable=usable, terms=terms, source=f"{SGLANG_VERSION}: {SGLANG_SOURCE}", fraction=static
    )


def flat_memory(gpu: Gpu, reserve: float) -> EngineMemory:
    """A flat share of each GPU's memory kept back."""
    usable = int(gpu.memory * (1 - reserve))
    terms = (
        MemoryTerm(name="device memory", bytes=gpu.memory, formula="the table's memory"),
        MemoryTerm(name="kept back", bytes=usable - gpu.memory, formula=f"--reserve {reserve:g}"),
    )
    return EngineMemory(engine=Engine.NONE, usable=usable, terms=terms, source="--engine none", fraction=1 - reserve)


def engine_memory(
    engine: Engine,
    gpu: Gpu,
    *,
    vocabulary: tuple[int, int],
    tp: int,
    gpus: int,
    fraction: float | None,
    reserve: float,
) -> EngineMemory:
    """What ``engine`` leaves ``gpu`` for the weights and the cache (``vocabulary``: the vocabulary and hidden size;
    ``gpus``: more than one brings communication buffers)."""
    if engine is Engine.VLLM:
        return vllm_memory(gpu, vocab=vocabulary[0], hidden=vocabulary[1], gpus=gpus, fraction=fraction)
    if engine is Engine.SGLANG:
        return sglang_memory(gpu, tp=tp, gpus=gpus, fraction=fraction)
    return flat_memory(gpu, reserve)
