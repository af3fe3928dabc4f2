"""Which configs choose the deepseek_v3 family (DeepSeek-V3, Kimi-K2, Moonlight), read without importing it."""

MODEL_TYPES: tuple[str, ...] = ("deepseek_v3", "kimi_k2")
"""Every ``model_type`` it accepts."""
ARCHITECTURES: tuple[str, ...] = ("DeepseekV3ForCausalLM",)
"""Every ``architectures`` entry it accepts when the model_type is unknown."""
