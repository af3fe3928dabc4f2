"""The plain alternative to `archviz cost` on a model without a hand-written family: import transformers, read the
config with AutoConfig and build the model on the meta device, as archviz's generic family must before it can read
the graph off the modules. Usage: python bench/plain_meta_build.py FOLDER (a folder holding config.json)"""

import sys

import torch
import transformers
from transformers import AutoConfig

config = AutoConfig.from_pretrained(sys.argv[1])
architecture = (getattr(config, "architectures", None) or [""])[0]
# The Auto class of the task the architecture's name implies, as archviz's meta stage picks it.
auto = (
    transformers.AutoModelForImageTextToText
    if architecture.endswith("ForConditionalGeneration")
    else transformers.AutoModelForCausalLM
)
with torch.device("meta"):
    model = auto.from_config(config)
print(type(model).__name__, sum(parameter.numel() for parameter in model.parameters()))
