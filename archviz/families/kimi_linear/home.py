"""Which configs choose the kimi_linear family (Kimi Linear, Kimi-K3's text model), read without importing it."""

MODEL_TYPES: tuple[str, ...] = ("kimi_linear",)
"""Every ``model_type`` it accepts."""
ARCHITECTURES: tuple[str, ...] = ("KimiLinearForCausalLM",)
"""Every ``architectures`` entry it accepts when the model_type is unknown."""
