"""The plain alternative to `archviz check MODEL` (no checkpoint): import transformers, build the model on the
meta device from its config and sum its parameters. Usage: python bench/plain_meta_count.py CONFIG MODEL_TYPE"""

import json
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

path, model_type = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as file:
    config = json.load(file)
for key in ("auto_map", "quantization_config", "model_type"):
    config.pop(key, None)
hf_config = AutoConfig.for_model(model_type, **config)
with torch.device("meta"):
    model = AutoModelForCausalLM.from_config(hf_config)
print(sum(parameter.numel() for parameter in model.parameters()))
