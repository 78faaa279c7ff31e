#!/usr/bin/python3
"""Checks the float64 reference (tests/reference/qwen2_ref.py) before it judges the engine:
its safetensors reader against hand-made bytes, RoPE and RMSNorm against hand-computed
values, and its vectorised forward pass against a second, loop-by-loop implementation of the
same facts, plus the invariants every correct causal model has (causality, GQA = repeated
heads, tied = untied with a copied head, sharded = single file). Needs no qmpi binary.
"""

import json
import math
import os
import struct
import sys
import tempfile

import numpy as np

import testlib
import qwen2_ref
import safetensors_ref

SMALL = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 50,
         "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}


def config(**overrides) -> dict:
    raw = dict(SMALL, architectures=["Qwen2ForCausalLM"], model_type="qwen2", **overrides)
    return raw


def random_tensors(raw: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    h, nh, nkv = raw["hidden_size"], raw["num_attention_heads"], raw["num_key_value_heads"]
    d, inter, vocab = h // nh, raw["intermediate_size"], raw["vocab_size"]

    def mat(*shape, scale=0.3):
        return rng.normal(0.0, scale, size=shape)

    t = {"model.embed_tokens.weight": mat(vocab, h, scale=1.0),
         "model.norm.weight": 1.0 + mat(h, scale=0.1)}
    for i in range(raw["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t.update({
            p + "input_layernorm.weight": 1.0 + mat(h, scale=0.1),
            p + "post_attention_layernorm.weight": 1.0 + mat(h, scale=0.1),
            p + "self_attn.q_proj.weight": mat(nh * d, h), p + "self_attn.q_proj.bias": mat(nh * d),
            p + "self_attn.k_proj.weight": mat(nkv * d, h),
            p + "self_attn.k_proj.bias": mat(nkv * d),
            p + "self_attn.v_proj.weight": mat(nkv * d, h),
            p + "self_attn.v_proj.bias": mat(nkv * d),
            p + "self_attn.o_proj.weight": mat(h, nh * d),
            p + "mlp.gate_proj.weight": mat(inter, h),
            p + "mlp.up_proj.weight": mat(inter, h),
            p + "mlp.down_proj.weight": mat(h, inter),
        })
    if not raw["tie_word_embeddings"]:
        t["lm_head.weight"] = mat(vocab, h, scale=1.0)
    return t


def save(folder: str, raw: dict, tensors: dict, dtype: str = "F32", shards: int = 1) -> str:
    safetensors_ref.write_model_dir(folder, tensors, dtype, shards)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(raw, f)
    return folder


def naive_logits(raw: dict, w: dict, ids) -> np.ndarray:
    """The facts sheet's steps one token, one head and one pair at a time, in plain loops."""
    h, nh, nkv = raw["hidden_size"], raw["num_attention_heads"], raw["num_key_value_heads"]
    d, eps, theta = h // nh, raw["rms_norm_eps"], raw["rope_theta"]
    group, half = nh // nkv, d // 2

    def norm(v, weight):
        scale = 1.0 / math.sqrt(sum(e * e for e in v) / len(v) + eps)
        return np.array([v[i] * scale * weight[i] for i in range(len(v))])

    def rope(vec, pos):
        out = vec.copy()
        for m in range(half):
            angle = pos * theta ** (-2.0 * m / d)
            a, b = vec[m], vec[m + half]
            out[m] = a * math.cos(angle) - b * math.sin(angle)
            out[m + half] = b * math.cos(angle) + a * math.sin(angle)
        return out

    xs = [w["model.embed_tokens.weight"][i].copy() for i in ids]
    for layer in range(raw["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        qs, ks, vs = [], [], []
        for pos, x in enumerate(xs):
            hn = norm(x, w[p + "input_layernorm.weight"])
            q = w[p + "self_attn.q_proj.weight"].dot(hn) + w[p + "self_attn.q_proj.bias"]
            k = w[p + "self_attn.k_proj.weight"].dot(hn) + w[p + "self_attn.k_proj.bias"]
            v = w[p + "self_attn.v_proj.weight"].dot(hn) + w[p + "self_attn.v_proj.bias"]
            qs.append([rope(q[j * d:(j + 1) * d], pos) for j in range(nh)])
            ks.append([rope(k[j * d:(j + 1) * d], pos) for j in range(nkv)])
            vs.append([v[j * d:(j + 1) * d] for j in range(nkv)])
        new_xs = []
        for t, x in enumerate(xs):
            heads = []
            for j in range(nh):
                kv = j // group
                scores = [float(qs[t][j].dot(ks[u][kv])) / math.sqrt(d) for u in range(t + 1)]
                top = max(scores)
                weights = [math.exp(s - top) for s in scores]
                total = sum(weights)
                heads.append(sum(weights[u] / total * vs[u][kv] for u in range(t + 1)))
            x = x + w[p + "self_attn.o_proj.weight"].dot(np.concatenate(heads))
            hn = norm(x, w[p + "post_attention_layernorm.weight"])
            g = w[p + "mlp.gate_proj.weight"].dot(hn)
            u = w[p + "mlp.up_proj.weight"].dot(hn)
            m = np.array([g[i] / (1.0 + math.exp(-g[i])) * u[i] for i in range(len(g))])
            new_xs.append(x + w[p + "mlp.down_proj.weight"].dot(m))
        xs = new_xs
    head = w["model.embed_tokens.weight"] if raw["tie_word_embeddings"] else w["lm_head.weight"]
    return np.array([head.dot(norm(x, w["model.norm.weight"])) for x in xs])


def rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check_reader(c: testlib.Checks, tmp: str) -> None:
    # Hand-made file: BF16 1.0, -2.0, 0.5, +inf and the smallest subnormal; F16 1.0 and -0.5.
    header = {"__metadata__": {"format": "pt"},
              "b": {"dtype": "BF16", "shape": [5], "data_offsets": [0, 10]},
              "h": {"dtype": "F16", "shape": [2], "data_offsets": [10, 14]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    data = struct.pack("<7H", 0x3F80, 0xC000, 0x3F00, 0x7F80, 0x0001, 0x3C00, 0xB800)
    path = os.path.join(tmp, "hand.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    got = safetensors_ref.read_file(path)
    want_b = [1.0, -2.0, 0.5, math.inf, 2.0 ** -133]
    c.check(got["b"].tolist() == want_b, f"BF16 bits decode to {got['b'].tolist()}")
    c.check(got["h"].tolist() == [1.0, -0.5], f"F16 bits decode to {got['h'].tolist()}")

    bad = os.path.join(tmp, "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 1000) + b"{}")
    try:
        safetensors_ref.read_file(bad)
        c.check(False, "header length past EOF was accepted")
    except safetensors_ref.SafetensorsError as e:
        c.check(True, f"header length past EOF rejected: {e}")
    overlap = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    text = json.dumps(overlap).encode()
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(12))
    try:
        safetensors_ref.read_file(bad)
        c.check(False, "overlapping tensors were accepted")
    except safetensors_ref.SafetensorsError as e:
        c.check(True, f"overlapping tensors rejected: {e}")

    values = {"x": np.array([[1.0, -2.5, 3.0e-3], [7.0, 0.0, -1.0e5]])}
    safetensors_ref.write_file(path, values, "F32")
    back = safetensors_ref.read_file(path)["x"]
    c.check(np.array_equal(back, values["x"].astype(np.float32)), "F32 write/read round trip")
    halfway = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8])
    safetensors_ref.write_file(path, {"x": halfway}, "BF16")
    back = safetensors_ref.read_file(path)["x"].tolist()
    c.check(back == [1.0, 1.0 + 2.0 ** -6], f"BF16 writer rounds to nearest even: {back}")


def check_rope_scaling(c: testlib.Checks) -> None:
    """The three scalings against what their documentation implies, worked by hand."""
    def scaling(**rs):
        return qwen2_ref.RopeScaling({"max_position_embeddings": 64, "rope_scaling": rs})
    plain = qwen2_ref.NO_SCALING.inv_freq(1e4, 16, 10)
    lin = scaling(type="linear", factor=4.0)
    c.check(np.allclose(lin.inv_freq(1e4, 16, 500), plain / 4, rtol=1e-15) and lin.attention == 1,
            "linear x4: every frequency / 4, cos and sin unscaled")
    dyn = scaling(rope_type="dynamic", factor=2.0)
    c.check(np.array_equal(dyn.inv_freq(1e4, 16, 64), plain), "dynamic at <= 64 tokens: unscaled")
    # 192 tokens at factor 2: base 1e4 * (2 * 3 - 1)^(16/14).
    want = 1.0 / np.power(1e4 * 5.0 ** (16 / 14), np.arange(8) * 2 / 16)
    c.check(np.allclose(dyn.inv_freq(1e4, 16, 192), want, rtol=1e-14), "dynamic NTK base at 192")
    yarn = scaling(type="yarn", factor=4.0, original_max_position_embeddings=64)
    c.check(abs(yarn.attention - (0.1 * math.log(4.0) + 1)) < 1e-15,
            f"yarn attention factor 0.1 ln 4 + 1 = {yarn.attention:.6f}")
    # d 16, theta 1e4, 64 tokens: pair m turns 64 / (2 pi 1e4^(m/8)) times; beta_fast 32 is
    # never reached (pair index < 0 -> low 0), beta_slow 1 at m = 8 ln(64 / 2pi) / ln 1e4 = 2.02
    # -> high 3: pairs 0..3 ramp from original to interpolated, 3.. fully interpolated.
    got = yarn.inv_freq(1e4, 16, 10) / plain
    ramp = np.clip(np.arange(8) / 3.0, 0, 1)
    c.check(np.allclose(got, 1 - ramp + ramp / 4, rtol=1e-15),
            f"yarn blend over pairs 0..3: ratios {got.round(4).tolist()}")
    c.check(scaling(type="yarn", factor=4.0, attention_factor=0.5).attention == 0.5,
            "yarn attention_factor given is used as is")


def check_math(c: testlib.Checks) -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(3, 5, 8))
    cos, sin = qwen2_ref.rope_tables(np.zeros(5), 8, 10000.0)
    c.check(np.array_equal(qwen2_ref.apply_rope(x, cos, sin), x), "RoPE at position 0 is identity")

    cos, sin = qwen2_ref.rope_tables(np.array([1.0]), 4, 10000.0)
    got = qwen2_ref.apply_rope(np.array([[[1.0, 0.0, 0.0, 0.0]]]), cos, sin)[0, 0]
    want = [math.cos(1.0), 0.0, math.sin(1.0), 0.0]
    c.check(np.allclose(got, want, atol=1e-15), f"RoPE pairs m with m+d/2: {got.round(6).tolist()}")

    q, k = rng.normal(size=(1, 1, 16)), rng.normal(size=(1, 1, 16))

    def score(pq, pk):
        cq, sq = qwen2_ref.rope_tables(np.array([pq]), 16, 1e6)
        ck, sk = qwen2_ref.rope_tables(np.array([pk]), 16, 1e6)
        return float(np.sum(qwen2_ref.apply_rope(q, cq, sq) * qwen2_ref.apply_rope(k, ck, sk)))

    drift = abs(score(9, 4) - score(1009, 1004))
    c.check(drift < 1e-9, f"RoPE scores depend on p_q - p_k only (drift {drift:.1e})")
    cos, sin = qwen2_ref.rope_tables(np.arange(5) * 37.0, 8, 1e6)
    norms = np.linalg.norm(qwen2_ref.apply_rope(x, cos, sin), axis=-1) / np.linalg.norm(x, axis=-1)
    c.check(np.allclose(norms, 1.0, atol=1e-14), "RoPE preserves vector norms")

    check_rope_scaling(c)

    weight = np.linspace(0.5, 2.0, 6)
    got = qwen2_ref.rms_norm(np.full(6, -3.0), weight, 1e-6)
    want = weight * -3.0 / math.sqrt(9.0 + 1e-6)
    c.check(np.allclose(got, want, rtol=1e-15),
            "RMSNorm of a constant vector is weight*c/sqrt(c^2+eps)")


def check_model(c: testlib.Checks, tmp: str) -> None:
    ids = [3, 17, 42, 0, 49, 17, 8, 25, 33]
    for layers in (1, 2):
        raw = config(num_hidden_layers=layers)
        w = random_tensors(raw, seed=layers)
        model = qwen2_ref.load_model(save(os.path.join(tmp, f"l{layers}"), raw, w))
        w32 = {n: v.astype(np.float32).astype(np.float64) for n, v in w.items()}
        err = rel(model.logits(ids), naive_logits(raw, w32, ids))
        c.check(err < 1e-12, f"{layers}-layer model: vectorised vs loop-by-loop rel err {err:.1e}")

    raw = config()
    w = random_tensors(raw, seed=5)
    base = qwen2_ref.load_model(save(os.path.join(tmp, "base"), raw, w))
    full = base.logits(ids)
    changed = base.logits(ids[:5] + [1, 2, 3, 4])
    err = rel(changed[:5], full[:5])
    c.check(err < 1e-13, f"causal: rows 0..4 ignore later tokens (rel diff {err:.1e})")
    c.check(rel(changed[5:], full[5:]) > 1e-3, "rows after the change do change")
    err = rel(base.logits(ids[:4]), full[:4])
    c.check(err < 1e-13, f"a prefix's logits are the full prompt's first rows ({err:.1e})")

    sharded = qwen2_ref.load_model(save(os.path.join(tmp, "sharded"), raw, w, shards=3))
    c.check(np.array_equal(sharded.logits(ids), full), "3 shards + index == single file, exactly")

    untied_raw = config(tie_word_embeddings=False)
    untied_w = dict(w, **{"lm_head.weight": w["model.embed_tokens.weight"]})
    untied = qwen2_ref.load_model(save(os.path.join(tmp, "untied"), untied_raw, untied_w))
    c.check(np.array_equal(untied.logits(ids), full), "untied with lm_head = embedding == tied")
    other_head = dict(w, **{"lm_head.weight": np.flip(w["model.embed_tokens.weight"], axis=0)})
    untied = qwen2_ref.load_model(save(os.path.join(tmp, "untied2"), untied_raw, other_head))
    c.check(np.allclose(untied.logits(ids), np.flip(full, axis=1), rtol=0, atol=1e-12),
            "an untied model uses lm_head.weight (reversed rows reverse the logits)")

    # GQA: 2 kv heads shared by 2 query heads each == 4 kv heads holding the repeated weights.
    mha_raw = config(num_key_value_heads=4)
    mha_w = dict(w)
    d = 4
    for i in range(raw["num_hidden_layers"]):
        for part in ("k_proj", "v_proj"):
            for suffix in ("weight", "bias"):
                name = f"model.layers.{i}.self_attn.{part}.{suffix}"
                blocks = np.split(w[name], 2, axis=0)
                mha_w[name] = np.concatenate([b for b in blocks for _ in range(2)], axis=0)
                assert blocks[0].shape[0] == d
    mha = qwen2_ref.load_model(save(os.path.join(tmp, "mha"), mha_raw, mha_w))
    err = rel(mha.logits(ids), full)
    c.check(err < 1e-13, f"GQA == MHA with repeated kv heads (rel diff {err:.1e})")

    bf16 = qwen2_ref.load_model(save(os.path.join(tmp, "bf16"), raw, w, dtype="BF16"))
    rounded = {}
    for n, v in w.items():
        bits = safetensors_ref._encode(v, "BF16")
        rounded[n] = safetensors_ref.decode(bits, "BF16").reshape(v.shape)
    err = rel(bf16.logits(ids), naive_logits(raw, rounded, ids))
    c.check(err < 1e-12, f"BF16 checkpoint == loops over its rounded weights ({err:.1e})")

    trace = base.greedy_trace(ids, 6)
    seq, ok = list(ids), True
    for tok, margin in trace:
        row = base.logits(seq)[-1]
        ok &= tok == int(np.argmax(row)) and abs(margin - (row[tok] - np.sort(row)[-2])) < 1e-12
        seq.append(tok)
    c.check(ok, f"greedy = argmax of the growing prompt's last row; margins "
                f"{[round(m, 3) for _, m in trace]}")

    first = trace[0][0]
    limited = base.greedy(ids, 1, valid_vocab=first)[0] if first > 0 else -1
    c.check(0 <= limited < first, f"greedy with valid_vocab={first} picks {limited}, below it")

    script = os.path.join(testlib.SOURCE_DIR, "tests", "reference", "qwen2_ref.py")
    out = os.path.join(tmp, "cli.npy")
    proc = testlib.run([sys.executable, script, "--model", os.path.join(tmp, "base"),
                        "--ids", testlib.ids_arg(ids), "--out", out, "--greedy", "6"])
    c.check(np.array_equal(np.load(out), full), "CLI --out writes the same logits")
    printed = json.loads(proc.stdout.strip().splitlines()[-1])
    c.check(printed["output_ids"] == [t for t, _ in trace], "CLI --greedy prints the same ids")


def body(c: testlib.Checks) -> None:
    parent = testlib.test_tmp() if os.environ.get("QMPI_TEST_TMP") else None
    with tempfile.TemporaryDirectory(prefix="refcheck-", dir=parent) as tmp:
        check_reader(c, tmp)
        check_math(c)
        check_model(c, tmp)


if __name__ == "__main__":
    testlib.main("reference_selfcheck", body)
