#!/usr/bin/python3
"""Float64 NumPy reference of the Qwen2 / Qwen2.5 dense forward pass: the tests' oracle.

Follows the facts sheet (qwen-facts.md section 2a) step by step and computes everything,
including RoPE frequencies and angles, in float64 from the checkpoint's weights, so any
difference from the engine is the engine's rounding (or a bug), never the oracle's.

Library use:
    model = load_model(dir); model.logits(ids) -> [T, vocab]; model.greedy(ids, n) -> ids
Command line:
    /usr/bin/python3 tests/reference/qwen2_ref.py --model DIR --ids 1,2,3 --out ref.npy
    /usr/bin/python3 tests/reference/qwen2_ref.py --model DIR --ids 1,2,3 --greedy 32
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_ref  # noqa: E402
import int4_ref  # noqa: E402
import kv_round  # noqa: E402
import safetensors_ref  # noqa: E402


class RopeScaling:
    """config.json's rope_scaling as transformers documents it (modeling_rope_utils.py), in
    float64: linear divides every inverse frequency by `factor`; dynamic (NTK) raises the base
    to theta * (factor * L / max_position_embeddings - (factor - 1)) ^ (d / (d - 2)) for a
    sequence of L > max_position_embeddings tokens; YaRN blends interpolated (/ factor) and
    original frequencies with a ramp over the pair index between the pairs that turn beta_fast
    and beta_slow times over original_max_position_embeddings, and multiplies cos and sin by
    0.1 ln(factor) + 1 (or attention_factor, or the mscale ratio)."""

    def __init__(self, raw: dict):
        rs = raw.get("rope_scaling") or {}
        self.kind = rs.get("rope_type", rs.get("type", "default"))
        if self.kind not in ("default", "linear", "dynamic", "yarn"):
            raise ValueError(f"the reference has no rope_scaling type {self.kind}")
        # Only the scalings read it (the self-check's configs without scaling leave it out).
        self.max_pos = int(raw["max_position_embeddings"] if rs else 0)
        self.original = int(rs.get("original_max_position_embeddings") or self.max_pos)
        self.factor = float(rs.get("factor") or
                            (self.max_pos / self.original if self.kind == "yarn" else 1.0))
        self.beta_fast = float(rs.get("beta_fast") or 32)
        self.beta_slow = float(rs.get("beta_slow") or 1)
        self.truncate = bool(rs.get("truncate", True))
        self.attention = 1.0
        if self.kind == "yarn":
            def mscale(scale, m=1.0):
                return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
            if rs.get("attention_factor") is not None:
                self.attention = float(rs["attention_factor"])
            elif rs.get("mscale") and rs.get("mscale_all_dim"):
                self.attention = (mscale(self.factor, rs["mscale"])
                                  / mscale(self.factor, rs["mscale_all_dim"]))
            else:
                self.attention = mscale(self.factor)

    def inv_freq(self, theta: float, d: int, seq_len: int) -> np.ndarray:
        """The d/2 inverse frequencies for a sequence of seq_len tokens."""
        exponent = 2.0 * np.arange(d // 2, dtype=np.float64) / d
        if self.kind == "dynamic" and seq_len > self.max_pos:
            ratio = self.factor * seq_len / self.max_pos - (self.factor - 1.0)
            theta = theta * ratio ** (d / (d - 2.0))
        inv = 1.0 / np.power(theta, exponent)
        if self.kind == "linear":
            inv = inv / self.factor
        if self.kind != "yarn":
            return inv

        def pair_turning(rotations):  # the pair index that turns `rotations` times
            return d * math.log(self.original / (rotations * 2 * math.pi)) / (2 * math.log(theta))
        low, high = pair_turning(self.beta_fast), pair_turning(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
        return (inv / self.factor) * ramp + inv * (1.0 - ramp)


class Qwen2Config:
    """The config.json fields the dense forward pass depends on."""

    def __init__(self, raw: dict):
        arch = raw.get("architectures", ["?"])[0]
        if arch != "Qwen2ForCausalLM":
            raise ValueError(f"the reference implements Qwen2ForCausalLM, not {arch}")
        self.hidden = int(raw["hidden_size"])
        self.layers = int(raw["num_hidden_layers"])
        self.heads = int(raw["num_attention_heads"])
        self.kv_heads = int(raw.get("num_key_value_heads", self.heads))
        # Qwen2 configs carry no head_dim; honour one if a config states it.
        self.head_dim = int(raw.get("head_dim") or self.hidden // self.heads)
        self.intermediate = int(raw["intermediate_size"])
        self.vocab = int(raw["vocab_size"])
        self.rope_theta = float(raw.get("rope_theta", 10000.0))
        self.rope = RopeScaling(raw)
        self.eps = float(raw["rms_norm_eps"])
        self.tied = bool(raw.get("tie_word_embeddings", False))
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.heads} heads do not group over {self.kv_heads} kv heads")


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis; no mean subtraction, no bias."""
    var = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(var + eps) * weight


NO_SCALING = RopeScaling({})


def rope_tables(positions: np.ndarray, head_dim: int, theta: float,
                rope: RopeScaling = NO_SCALING, prompt_len: int = 0):
    """cos and sin [T, head_dim]: the head_dim/2 angles p * inv_freq, repeated twice, times
    the scaling's attention factor. Dynamic scaling gives position p the frequencies of the
    sequence's length when p was computed, as transformers' cached generation does: the prompt
    (prompt_len tokens) at its own length, each generated token at p + 1."""
    positions = np.asarray(positions, dtype=np.int64)
    inv = np.stack([rope.inv_freq(theta, head_dim, max(prompt_len, int(p) + 1))
                    for p in positions]) if rope.kind == "dynamic" else \
        rope.inv_freq(theta, head_dim, prompt_len)[None, :]
    angles = positions.astype(np.float64)[:, None] * inv
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles) * rope.attention, np.sin(angles) * rope.attention


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate-half RoPE on x [heads, T, d]: element m pairs with m + d/2."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[None] + rotated * sin[None]


def silu(z: np.ndarray) -> np.ndarray:
    return z / (1.0 + np.exp(-z))


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """q [nh, T, d], k/v [nkv, T, d] -> [T, nh*d]; query head j reads kv head j // (nh/nkv)."""
    nh, t, d = q.shape
    group = nh // k.shape[0]
    k = np.repeat(k, group, axis=0)
    v = np.repeat(v, group, axis=0)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
    future = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = np.where(future[None], -np.inf, scores)
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    out = probs @ v  # [nh, T, d]
    return out.transpose(1, 0, 2).reshape(t, nh * d)


class GreedyDecoding:
    """Greedy decoding for any oracle with hidden_states(ids), lm_head and cfg.vocab."""

    def greedy_trace(self, ids, n: int, valid_vocab: int = 0):
        """n greedy steps recomputed from scratch each step: [(token, top1 - top2 logit)].

        valid_vocab > 0 restricts the choice to ids below it (embedding rows past the
        tokenizer's vocabulary have no text, and an engine may refuse to sample them)."""
        limit = valid_vocab if valid_vocab > 0 else self.cfg.vocab
        seq, trace = list(ids), []
        for _ in range(n):
            last = (self.hidden_states(seq, len(ids))[-1] @ self.lm_head.T)[:limit]
            best = int(np.argmax(last))  # first index among exact ties
            top2 = np.argpartition(-last, 1)[:2]
            second = top2[0] if top2[0] != best else top2[1]
            trace.append((best, float(last[best] - last[second])))
            seq.append(best)
        return trace

    def greedy(self, ids, n: int, valid_vocab: int = 0) -> list:
        return [tok for tok, _ in self.greedy_trace(ids, n, valid_vocab)]


class Qwen2Reference(GreedyDecoding):
    def __init__(self, config: Qwen2Config, tensors: dict, kv_dtype: str = "f32"):
        """kv_dtype: round K and V as a KV cache of that type stores them (kv_round.py)."""
        self.cfg = config
        self.w = tensors
        self.kv_round = kv_round.ROUNDING[kv_dtype]
        self._check_shapes()
        if config.tied:
            self.lm_head = tensors["model.embed_tokens.weight"]
        elif "lm_head.weight" in tensors:
            self.lm_head = tensors["lm_head.weight"]
        else:
            raise ValueError("tie_word_embeddings is false but there is no lm_head.weight")

    def _check_shapes(self):
        c = self.cfg
        q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
        want = {"model.embed_tokens.weight": (c.vocab, c.hidden), "model.norm.weight": (c.hidden,)}
        for i in range(c.layers):
            p = f"model.layers.{i}."
            want.update({
                p + "input_layernorm.weight": (c.hidden,),
                p + "post_attention_layernorm.weight": (c.hidden,),
                p + "self_attn.q_proj.weight": (q, c.hidden), p + "self_attn.q_proj.bias": (q,),
                p + "self_attn.k_proj.weight": (kv, c.hidden), p + "self_attn.k_proj.bias": (kv,),
                p + "self_attn.v_proj.weight": (kv, c.hidden), p + "self_attn.v_proj.bias": (kv,),
                p + "self_attn.o_proj.weight": (c.hidden, q),
                p + "mlp.gate_proj.weight": (c.intermediate, c.hidden),
                p + "mlp.up_proj.weight": (c.intermediate, c.hidden),
                p + "mlp.down_proj.weight": (c.hidden, c.intermediate),
            })
        if not c.tied:
            want["lm_head.weight"] = (c.vocab, c.hidden)
        for name, shape in want.items():
            if name not in self.w:
                raise ValueError(f"checkpoint lacks {name}")
            if tuple(self.w[name].shape) != shape:
                raise ValueError(f"{name} has shape {self.w[name].shape}, config implies {shape}")

    def _layer(self, i: int, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        c, w, p = self.cfg, self.w, f"model.layers.{i}."
        t, d = x.shape[0], c.head_dim
        h = rms_norm(x, w[p + "input_layernorm.weight"], c.eps)
        q = h @ w[p + "self_attn.q_proj.weight"].T + w[p + "self_attn.q_proj.bias"]
        k = h @ w[p + "self_attn.k_proj.weight"].T + w[p + "self_attn.k_proj.bias"]
        v = h @ w[p + "self_attn.v_proj.weight"].T + w[p + "self_attn.v_proj.bias"]
        q = q.reshape(t, c.heads, d).transpose(1, 0, 2)
        k = k.reshape(t, c.kv_heads, d).transpose(1, 0, 2)
        v = v.reshape(t, c.kv_heads, d).transpose(1, 0, 2)
        k, v = self.kv_round(apply_rope(k, cos, sin)), self.kv_round(v)
        attn = causal_attention(apply_rope(q, cos, sin), k, v)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], c.eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        return x + (silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T

    def hidden_states(self, ids, prompt_len: int = 0) -> np.ndarray:
        """Final-normed hidden states [T, hidden] of a prompt starting at position 0 (the
        first prompt_len ids were the prompt, the rest generated; 0: all prompt)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if ids.min() < 0 or ids.max() >= self.cfg.vocab:
            raise ValueError(f"ids must lie in [0, {self.cfg.vocab})")
        x = self.w["model.embed_tokens.weight"][ids]
        cos, sin = rope_tables(np.arange(ids.size), self.cfg.head_dim, self.cfg.rope_theta,
                               self.cfg.rope, prompt_len or ids.size)
        for i in range(self.cfg.layers):
            x = self._layer(i, x, cos, sin)
        return rms_norm(x, self.w["model.norm.weight"], self.cfg.eps)

    def logits(self, ids) -> np.ndarray:
        """Logits of every position, [T, vocab] float64."""
        return self.hidden_states(ids) @ self.lm_head.T


def dequantized(tensors: dict, raw: dict) -> dict:
    """A checkpoint's tensors as float weights: int4 and FP8 projections through the reference's
    own decoding (int4_ref, fp8_ref), then float math like any other model."""
    quant = raw.get("quantization_config")
    if not quant:
        return tensors
    ref = fp8_ref if quant.get("quant_method") == "fp8" else int4_ref
    return ref.dequantize_tensors(tensors, quant)


def load_model(model_dir: str, kv_dtype: str = "f32") -> Qwen2Reference:
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    tensors = dequantized(safetensors_ref.read_model_dir(model_dir), raw)
    return Qwen2Reference(Qwen2Config(raw), tensors, kv_dtype)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face model folder")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--out", help="write float64 logits [T, vocab] to this .npy file")
    ap.add_argument("--greedy", type=int, default=0,
                    help="print N greedy ids and top-2 margins as JSON on stdout")
    ap.add_argument("--valid-vocab", type=int, default=0,
                    help="greedy picks only ids below this (default: every embedding row)")
    ap.add_argument("--kv-dtype", default="f32", choices=sorted(kv_round.ROUNDING),
                    help="round K and V as qmpi's KV cache of this type stores them")
    args = ap.parse_args(argv)
    if not args.out and not args.greedy:
        ap.error("give --out, --greedy N, or both")
    ids = [int(s) for s in args.ids.split(",") if s.strip()]
    model = load_model(args.model, args.kv_dtype)
    if args.out:
        np.save(args.out, model.logits(ids))
    if args.greedy:
        trace = model.greedy_trace(ids, args.greedy, args.valid_vocab)
        print(json.dumps({"output_ids": [t for t, _ in trace], "margins": [m for _, m in trace]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
