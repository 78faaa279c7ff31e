#!/usr/bin/python3
"""Checks the family reference (tests/reference/qwen_family_ref.py) before it judges the
engine: its top-k breaks ties toward the lower expert index (as torch.topk) and renormalises
only when asked; on a Qwen2 config it equals qwen2_ref exactly; its grouped-by-expert MoE equals
a token-by-token loop over the chosen experts; an MoE layer of one expert picked with weight 1
is that expert's dense MLP; Qwen3's q/k norm with unit weights makes every head unit-RMS before
RoPE. Needs no qmpi binary.
"""

import os
import tempfile

import numpy as np

import testlib
import qwen2_ref
import qwen_family_ref as fam
from reference_selfcheck import SMALL, random_tensors, save


def check_top_k(c: testlib.Checks) -> None:
    probs = np.array([[0.1, 0.3, 0.3, 0.0, 0.3], [0.25, 0.25, 0.25, 0.25, 0.0]])
    idx, val = fam.top_k(probs, 2)
    c.check(idx.tolist() == [[1, 2], [0, 1]], f"ties go to the lower index first: {idx.tolist()}")
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(50, 8))
    for norm in (False, True):
        experts, weights = fam.route(logits, 3, norm)
        p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        want = np.stack([np.argsort(-row, kind="stable")[:3] for row in p])
        raw = np.take_along_axis(p, want, -1)
        ok = np.array_equal(experts, want) and np.allclose(
            weights, raw / raw.sum(-1, keepdims=True) if norm else raw, rtol=1e-14)
        c.check(ok, f"route(norm_topk_prob={norm}) = softmax, top-3, "
                    f"{'renormalised' if norm else 'raw'} weights")


def moe_config(**over) -> dict:
    raw = dict(SMALL, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe",
               num_experts=4, num_experts_per_tok=2, moe_intermediate_size=8,
               shared_expert_intermediate_size=12, norm_topk_prob=False, decoder_sparse_step=1,
               mlp_only_layers=[])
    raw.update(over)
    return raw


def moe_tensors(raw: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    t = random_tensors(dict(raw, architectures=["Qwen2ForCausalLM"]), seed)
    h, im, si = raw["hidden_size"], raw["moe_intermediate_size"], raw.get(
        "shared_expert_intermediate_size", 0)
    for i in range(raw["num_hidden_layers"]):
        p = f"model.layers.{i}.mlp."
        for n in ("gate_proj", "up_proj", "down_proj"):
            t.pop(p + n + ".weight")
        t[p + "gate.weight"] = rng.normal(0, 1.0, (raw["num_experts"], h))
        for e in range(raw["num_experts"]):
            t[f"{p}experts.{e}.gate_proj.weight"] = rng.normal(0, 0.3, (im, h))
            t[f"{p}experts.{e}.up_proj.weight"] = rng.normal(0, 0.3, (im, h))
            t[f"{p}experts.{e}.down_proj.weight"] = rng.normal(0, 0.3, (h, im))
        if si:
            t[p + "shared_expert.gate_proj.weight"] = rng.normal(0, 0.3, (si, h))
            t[p + "shared_expert.up_proj.weight"] = rng.normal(0, 0.3, (si, h))
            t[p + "shared_expert.down_proj.weight"] = rng.normal(0, 0.3, (h, si))
            t[p + "shared_expert_gate.weight"] = rng.normal(0, 0.3, (1, h))
    return t


def loop_moe(ref, p, x):
    """Token by token, expert by chosen expert: the plain form of facts §2c."""
    c, w = ref.cfg, ref.w
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        logits = x[t] @ w[p + "gate.weight"].T
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        chosen = sorted(range(c.experts), key=lambda e: (-probs[e], e))[:c.top_k]
        weights = probs[chosen] / (probs[chosen].sum() if c.norm_topk else 1.0)
        for e, wt in zip(chosen, weights):
            q = f"{p}experts.{e}."
            g = x[t] @ w[q + "gate_proj.weight"].T
            u = x[t] @ w[q + "up_proj.weight"].T
            out[t] += wt * ((qwen2_ref.silu(g) * u) @ w[q + "down_proj.weight"].T)
        if c.shared_intermediate:
            q = p + "shared_expert."
            s = (qwen2_ref.silu(x[t] @ w[q + "gate_proj.weight"].T) *
                 (x[t] @ w[q + "up_proj.weight"].T)) @ w[q + "down_proj.weight"].T
            out[t] += s / (1.0 + np.exp(-(x[t] @ w[p + "shared_expert_gate.weight"].T)))
    return out


def check_models(c: testlib.Checks, tmp: str) -> None:
    ids = [3, 17, 5, 42, 8, 1, 30]
    raw = dict(SMALL, architectures=["Qwen2ForCausalLM"], model_type="qwen2")
    d = save(os.path.join(tmp, "q2"), raw, random_tensors(raw, 5))
    same = np.array_equal(fam.load_model(d).logits(ids), qwen2_ref.load_model(d).logits(ids))
    c.check(same, "Qwen2 config: family reference == qwen2_ref, exactly")

    x = np.random.default_rng(9).normal(size=(len(ids), SMALL["hidden_size"]))
    for norm in (False, True):
        raw = moe_config(norm_topk_prob=norm)
        ref = fam.load_model(save(os.path.join(tmp, f"moe{norm}"), raw, moe_tensors(raw, 6)))
        got = ref._moe("model.layers.0.mlp.", x, {})
        err = float(np.max(np.abs(got - loop_moe(ref, "model.layers.0.mlp.", x))))
        c.check(err < 1e-12, f"grouped MoE == per-token loop, norm_topk_prob={norm} ({err:.1e})")

    raw = moe_config(num_experts=1, num_experts_per_tok=1, norm_topk_prob=True,
                     shared_expert_intermediate_size=0, architectures=["Qwen3MoeForCausalLM"],
                     head_dim=6)
    ref = fam.load_model(save(os.path.join(tmp, "one"), raw, moe_tensors(raw, 7)))
    got = ref._moe("model.layers.1.mlp.", x, {})
    dense = ref._swiglu(x, "model.layers.1.mlp.experts.0", raw["moe_intermediate_size"])
    c.check(np.allclose(got, dense, rtol=1e-14, atol=0), "one expert at weight 1 == its dense MLP")

    # Qwen3 q/k norm: unit weights leave every head of q with RMS 1 before RoPE (RoPE keeps
    # norms, so the traced q still has it).
    raw = dict(SMALL, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=6)
    t = random_tensors(dict(raw, architectures=["Qwen2ForCausalLM"]), 8)
    h, nh, nkv, hd = raw["hidden_size"], raw["num_attention_heads"], raw["num_key_value_heads"], 6
    rng = np.random.default_rng(8)
    for i in range(raw["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        for n in ("q_proj.bias", "k_proj.bias", "v_proj.bias"):
            t.pop(p + n)
        t[p + "q_proj.weight"] = rng.normal(0, 0.3, (nh * hd, h))
        t[p + "k_proj.weight"] = rng.normal(0, 0.3, (nkv * hd, h))
        t[p + "v_proj.weight"] = rng.normal(0, 0.3, (nkv * hd, h))
        t[p + "o_proj.weight"] = rng.normal(0, 0.3, (h, nh * hd))
        t[p + "q_norm.weight"] = np.ones(hd)
        t[p + "k_norm.weight"] = np.ones(hd)
    ref = fam.load_model(save(os.path.join(tmp, "q3"), raw, t))
    _, layers = ref.trace(ids)
    q = layers[0]["q"].reshape(len(ids), nh, hd)
    rms = np.sqrt(np.mean(q * q, axis=-1))
    c.check(np.allclose(rms, 1.0, atol=1e-5), f"q/k norm: every q head has RMS 1 "
                                              f"(max dev {np.max(np.abs(rms - 1)):.1e})")


def body(c: testlib.Checks) -> None:
    check_top_k(c)
    parent = testlib.test_tmp() if os.environ.get("QMPI_TEST_TMP") else None
    with tempfile.TemporaryDirectory(prefix="famref-", dir=parent) as tmp:
        check_models(c, tmp)


if __name__ == "__main__":
    testlib.main("family_reference_selfcheck", body)
