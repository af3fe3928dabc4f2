"""Which configs choose a llama-style family (one per variant in ``variants.py``), read without importing it."""

MODEL_TYPES: tuple[str, ...] = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe")
"""Every ``model_type`` its variants accept."""
ARCHITECTURES: tuple[str, ...] = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "MixtralForCausalLM",
    "Qwen3MoeForCausalLM",
)
"""Every ``architectures`` entry its variants accept when the model_type is unknown."""
