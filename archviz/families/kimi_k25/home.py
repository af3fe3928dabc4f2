"""Which configs choose the kimi_k25 family (Kimi-K2.5), read without importing it."""

MODEL_TYPES: tuple[str, ...] = ("kimi_k25",)
"""Every ``model_type`` it accepts."""
ARCHITECTURES: tuple[str, ...] = ("KimiK25ForConditionalGeneration", "Kimi_K25ForConditionalGeneration")
"""Every ``architectures`` entry it accepts when the model_type is unknown."""
