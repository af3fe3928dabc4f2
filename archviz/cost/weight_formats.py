"""What `plan --weights FORMAT` plans a release as: the ``quantization_config`` a quantized release of it would carry,
in the layout of the releases people serve (each already modelled on every path, ``archviz/families``), given to the
model as an assumption for the key the release lacks.

This module must not import torch or transformers.
"""

from __future__ import annotations

from typing import Any

_NVFP4_TENSOR = {
    "num_bits": 4,
    "type": "float",
    "symmetric": True,
    "strategy": "tensor_group",
    "group_size": 16,
    "scale_dtype": "torch.float8_e4m3fn",
}

WEIGHT_FORMATS: dict[str, tuple[dict[str, Any], str]] = {
    "fp8": (
        {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
        "FP8 (E4M3) in 128 × 128 blocks with a float32 scale each, as DeepSeek's, Qwen's and MiniMax's FP8 releases "
        "store them (transformers' fine-grained FP8)",
    ),
    "int4": (
        {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 4,
                        "type": "int",
                        "symmetric": True,
                        "strategy": "group",
                        "group_size": 128,
                        "dynamic": False,
                    },
                }
            },
            "ignore": ["lm_head"],
        },
        "INT4 in groups of 128 (compressed-tensors' pack-quantized W4A16, as Kimi-K2.5's release and llm-compressor "
        "store them), the head left in its dtype",
    ),
    "nvfp4": (
        {
            "quant_method": "compressed-tensors",
            "format": "nvfp4-pack-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {**_NVFP4_TENSOR, "dynamic": False},
                    "input_activations": {**_NVFP4_TENSOR, "dynamic": "local"},
                }
            },
            "ignore": ["lm_head"],
        },
        "NVFP4 (FP4 in groups of 16 with an FP8 scale each and a float32 global scale; compressed-tensors' "
        "nvfp4-pack-quantized, as llm-compressor stores it), the head left in its dtype",
    ),
    "mxfp4": (
        {"quant_method": "mxfp4"},
        "MXFP4 (FP4 in blocks of 32 with an E8M0 scale each) on the banks of experts transformers' MXFP4 quantizer "
        "converts, as gpt-oss's release stores them",
    ),
}
"""Each ``--weights`` choice: the ``quantization_config`` it assumes, and what that stores, in words."""
