#!/usr/bin/python3
"""Float64 NumPy reference of the Qwen3, Qwen2-MoE and Qwen3-MoE forward passes (and Qwen2's,
through the same code): the tests' oracle for the families beyond qwen2_ref.py.

Written from the facts sheet's architecture description (qwen-facts.md sections 2a-2d):
- Qwen3: RMSNorm of every q and k head over head_dim (q_norm / k_norm) before RoPE, no q/k/v
  bias, head_dim from the config (heads x head_dim may differ from hidden).
- MoE layers (not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0): router logits,
  softmax over all experts, the top-k (ties to the lower expert index, as torch.topk), weights
  renormalised when norm_topk_prob, the weighted sum of the chosen experts' SwiGLU outputs and,
  on Qwen2-MoE, the shared expert scaled by sigmoid(shared_expert_gate(x)).
Shared math (RMSNorm, RoPE, attention, SiLU) comes from qwen2_ref.

Library use:
    model = load_model(dir); model.logits(ids); model.greedy(ids, n); model.trace(ids)
Command line:
    /usr/bin/python3 tests/reference/qwen_family_ref.py --model DIR --ids 1,2,3 --out ref.npy
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_ref  # noqa: E402
from qwen2_ref import (GreedyDecoding, RopeScaling, apply_rope, causal_attention,  # noqa: E402
                       dequantized, rms_norm, rope_tables, silu)

ARCHS = {
    # name: (q/k norm, moe, shared expert)
    "Qwen2ForCausalLM": (False, False, False),
    "Qwen3ForCausalLM": (True, False, False),
    "Qwen2MoeForCausalLM": (False, True, True),
    "Qwen3MoeForCausalLM": (True, True, False),
}


class FamilyConfig:
    def __init__(self, raw: dict):
        arch = raw.get("architectures", ["?"])[0]
        if arch not in ARCHS:
            raise ValueError(f"the reference implements {sorted(ARCHS)}, not {arch}")
        self.arch = arch
        self.qk_norm, self.moe, shared = ARCHS[arch]
        self.hidden = int(raw["hidden_size"])
        self.layers = int(raw["num_hidden_layers"])
        self.heads = int(raw["num_attention_heads"])
        self.kv_heads = int(raw.get("num_key_value_heads", self.heads))
        self.head_dim = int(raw.get("head_dim") or self.hidden // self.heads)
        self.intermediate = int(raw["intermediate_size"])
        self.vocab = int(raw["vocab_size"])
        self.rope_theta = float(raw.get("rope_theta", 10000.0))
        self.rope = RopeScaling(raw)
        self.eps = float(raw["rms_norm_eps"])
        self.tied = bool(raw.get("tie_word_embeddings", False))
        if self.qk_norm:
            self.bias = bool(raw.get("attention_bias", False))
        else:
            self.bias = bool(raw.get("qkv_bias", True))
        if self.moe:
            self.experts = int(raw["num_experts"])
            self.top_k = int(raw["num_experts_per_tok"])
            self.moe_intermediate = int(raw["moe_intermediate_size"])
            self.shared_intermediate = int(raw["shared_expert_intermediate_size"]) if shared else 0
            self.norm_topk = bool(raw.get("norm_topk_prob", False))
            self.sparse_step = int(raw.get("decoder_sparse_step", 1))
            self.mlp_only = set(int(i) for i in raw.get("mlp_only_layers") or [])

    def is_moe_layer(self, i: int) -> bool:
        return self.moe and i not in self.mlp_only and (i + 1) % self.sparse_step == 0


def top_k(probs: np.ndarray, k: int):
    """Indices [T, k] of the k largest probabilities per row, largest first; equal values go to
    the lower index first (a stable sort of the negated values), which is what torch.topk
    returns on ties."""
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    return order, np.take_along_axis(probs, order, axis=-1)


def route(logits: np.ndarray, k: int, norm_topk: bool):
    """(experts [T, k], weights [T, k]) from router logits [T, E]."""
    z = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(axis=-1, keepdims=True)
    experts, weights = top_k(probs, k)
    if norm_topk:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return experts, weights


class FamilyReference(GreedyDecoding):
    def __init__(self, config: FamilyConfig, tensors: dict):
        self.cfg = config
        self.w = tensors
        if config.tied:
            self.lm_head = tensors["model.embed_tokens.weight"]
        elif "lm_head.weight" in tensors:
            self.lm_head = tensors["lm_head.weight"]
        else:
            raise ValueError("tie_word_embeddings is false but there is no lm_head.weight")

    def _t(self, name: str, shape) -> np.ndarray:
        if name not in self.w:
            raise ValueError(f"checkpoint lacks {name}")
        if tuple(self.w[name].shape) != tuple(shape):
            raise ValueError(f"{name} has shape {self.w[name].shape}, config implies {shape}")
        return self.w[name]

    def _linear(self, x, name, out, inp, bias=False):
        y = x @ self._t(name + ".weight", (out, inp)).T
        return y + self._t(name + ".bias", (out,)) if bias else y

    def _swiglu(self, x, prefix, width):
        h = self.cfg.hidden
        gate = self._linear(x, prefix + ".gate_proj", width, h)
        up = self._linear(x, prefix + ".up_proj", width, h)
        return self._linear(silu(gate) * up, prefix + ".down_proj", h, width)

    def _attention(self, p, x, cos, sin, trace):
        c = self.cfg
        t, d, h = x.shape[0], c.head_dim, c.hidden
        q = self._linear(x, p + "q_proj", c.heads * d, h, c.bias).reshape(t, c.heads, d)
        k = self._linear(x, p + "k_proj", c.kv_heads * d, h, c.bias).reshape(t, c.kv_heads, d)
        v = self._linear(x, p + "v_proj", c.kv_heads * d, h, c.bias).reshape(t, c.kv_heads, d)
        if c.qk_norm:
            q = rms_norm(q, self._t(p + "q_norm.weight", (d,)), c.eps)
            k = rms_norm(k, self._t(p + "k_norm.weight", (d,)), c.eps)
        q = apply_rope(q.transpose(1, 0, 2), cos, sin)
        k = apply_rope(k.transpose(1, 0, 2), cos, sin)
        trace["q"] = q.transpose(1, 0, 2).reshape(t, -1)
        trace["k"] = k.transpose(1, 0, 2).reshape(t, -1)
        attn = causal_attention(q, k, v.transpose(1, 0, 2))
        return self._linear(attn, p + "o_proj", h, c.heads * d)

    def _moe(self, p, x, trace):
        c = self.cfg
        logits = self._linear(x, p + "gate", c.experts, c.hidden)
        trace["router_logits"] = logits
        experts, weights = route(logits, c.top_k, c.norm_topk)
        out = np.zeros_like(x)
        for e in range(c.experts):  # grouped by expert, as the engine computes it
            rows, slot = np.nonzero(experts == e)
            if rows.size:
                y = self._swiglu(x[rows], f"{p}experts.{e}", c.moe_intermediate)
                out[rows] += weights[rows, slot][:, None] * y
        if c.shared_intermediate:
            gate = self._linear(x, p + "shared_expert_gate", 1, c.hidden)
            shared = self._swiglu(x, p + "shared_expert", c.shared_intermediate)
            out += 1.0 / (1.0 + np.exp(-gate)) * shared
        return out

    def _layer(self, i, x, cos, sin, trace):
        c, p = self.cfg, f"model.layers.{i}."
        h = rms_norm(x, self._t(p + "input_layernorm.weight", (c.hidden,)), c.eps)
        trace["attn_norm"] = h
        a = self._attention(p + "self_attn.", h, cos, sin, trace)
        trace["attn_out"] = a
        x = x + a
        h = rms_norm(x, self._t(p + "post_attention_layernorm.weight", (c.hidden,)), c.eps)
        trace["mlp_norm"] = h
        if c.is_moe_layer(i):
            m = self._moe(p + "mlp.", h, trace)
        else:
            m = self._swiglu(h, p + "mlp", c.intermediate)
        trace["mlp_out"] = m
        x = x + m
        trace["hidden"] = x
        return x

    def trace(self, ids, prompt_len: int = 0):
        """(final-normed hidden [T, hidden], [per-layer dict of intermediates]) from position 0
        (prompt_len: as in qwen2_ref's hidden_states); the dict's names are the engine's
        QMPI_DUMP names."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= self.cfg.vocab:
            raise ValueError(f"ids must lie in [0, {self.cfg.vocab})")
        x = self._t("model.embed_tokens.weight", (self.cfg.vocab, self.cfg.hidden))[ids]
        cos, sin = rope_tables(np.arange(ids.size), self.cfg.head_dim, self.cfg.rope_theta,
                               self.cfg.rope, prompt_len or ids.size)
        layers = []
        for i in range(self.cfg.layers):
            layers.append({})
            x = self._layer(i, x, cos, sin, layers[-1])
        return rms_norm(x, self.w["model.norm.weight"], self.cfg.eps), layers

    def hidden_states(self, ids, prompt_len: int = 0) -> np.ndarray:
        return self.trace(ids, prompt_len)[0]

    def logits(self, ids) -> np.ndarray:
        """Logits of every position, [T, vocab] float64."""
        return self.hidden_states(ids) @ self.lm_head.T


def load_model(model_dir: str) -> FamilyReference:
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    return FamilyReference(FamilyConfig(raw),
                           dequantized(safetensors_ref.read_model_dir(model_dir), raw))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face model folder")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--out", required=True, help="write float64 logits [T, vocab] to this .npy")
    args = ap.parse_args(argv)
    ids = [int(s) for s in args.ids.split(",") if s.strip()]
    np.save(args.out, load_model(args.model).logits(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
