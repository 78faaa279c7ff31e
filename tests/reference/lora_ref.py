"""LoRA adapters (PEFT layout) merged into a base model's weights, in float64, for the oracle.

Written from PEFT's description of a LoRA linear layer: y = W x + scale * B (A x) with
lora_A [r, in], lora_B [out, r] and scale = lora_alpha / r (lora_alpha / sqrt(r) with
use_rslora), so the merged weight is W + scale * B @ A. Tensor names are
base_model.model.<base weight name without .weight>.lora_A.weight / .lora_B.weight. The engine
never merges (it adds the low-rank delta per row group); this is the independent other way.
"""

import json
import math
import os

import safetensors_ref

PREFIX = "base_model.model."


def adapter_scale(config: dict) -> float:
    r, alpha = config["r"], config["lora_alpha"]
    return alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r


def merged(tensors: dict, adapter_dir: str) -> dict:
    """A copy of `tensors` (name -> float64 array) with every adapted projection merged."""
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        config = json.load(f)
    if config.get("bias", "none") != "none":
        raise ValueError("the reference merges bias-free adapters only")
    scale = adapter_scale(config)
    lora = safetensors_ref.read_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
    out = dict(tensors)
    for name, a in lora.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[len(PREFIX):-len(".lora_A.weight")]
        b = lora[name.replace(".lora_A.", ".lora_B.")]
        base = module + ".weight"
        if base not in out:
            raise ValueError(f"adapter tensor {name} has no base weight {base}")
        out[base] = out[base] + scale * (b @ a)
    return out
