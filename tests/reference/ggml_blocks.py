"""The reference's own GGUF block decoder and encoder, for the weight types qmpi loads.

Written from the GGUF/ggml block layouts, sharing nothing with the engine (kernels/cpu decodes
element by element; this unpacks whole bit planes with NumPy). All multi-byte fields are
little-endian; a tensor [rows, cols] is stored row by row, cols / block_elems blocks per row.

  F32, F16, BF16   one element per "block", plain little-endian floats
  Q4_0  (32, 18)   d:f16, qs[16]: element i low nibble of qs[i], i + 16 high;    w = (q - 8) d
  Q4_1  (32, 20)   d:f16, m:f16, qs[16] as Q4_0;                                 w = q d + m
  Q5_0  (32, 22)   d:f16, qh:u32, qs[16]: q = nibble | bit i of qh << 4;         w = (q - 16) d
  Q5_1  (32, 24)   d:f16, m:f16, qh:u32, qs[16] as Q5_0;                         w = q d + m
  Q8_0  (32, 34)   d:f16, qs:int8[32];                                           w = q d
  Q2_K (256, 84)   scales[16] (low nibble scale, high nibble min, per 16 elements), qs[64],
                   d:f16, dmin:f16. Element 128 h + 32 j + l is bits 2j..2j+1 of qs[32 h + l];
                   w = d (sc & 15) q - dmin (sc >> 4)
  Q3_K (256, 110)  hmask[32], qs[64] (as Q2_K), scales[12] (sixteen 6-bit values, stored + 32),
                   d:f16. Bit 4 h + j of hmask[l] is the element's third bit; w = d s (q - 4)
                   with q the 3-bit value. Scale j: low nibble from byte j (j < 8) or the high
                   nibble of byte j - 8; its top two bits are bits 2 (j // 4) of byte 8 + j % 4.
  Q4_K (256, 144)  d:f16, dmin:f16, scales[12] (eight 6-bit scales and mins, packed below),
                   qs[128]: 32-element sub-blocks 2p and 2p+1 are the low and high nibbles of
                   qs[32p:32p+32]; w = d sc q - dmin m
  Q5_K (256, 176)  as Q4_K with qh[32] before qs: bit s of qh[l] is the fifth bit of element l of
                   sub-block s
  Q6_K (256, 210)  ql[128], qh[64], scales:int8[16], d:f16. Element 128 h + 32 k + l: low nibble
                   of ql[64 h + l + 32 (k % 2)] (low half for k < 2, high for k >= 2), top two
                   bits at bits 2k of qh[32 h + l]; w = d sc (q - 32)

Q4_K/Q5_K scale packing (bytes s[0..11]; scale/min of sub-block j): j < 4: s[j] & 63 and
s[j + 4] & 63; j >= 4: (s[j + 4] & 15) | (s[j - 4] >> 6) << 4 and (s[j + 4] >> 4) | (s[j] >> 6) << 4.

API: quantize(type_name, float_array_2d) -> bytes and dequantize(type_name, bytes, shape) ->
float64 array. The encoder rounds to nearest with a simple scale choice per (sub-)block (the
largest magnitude sets the scale; k-quant super-block scales from the largest sub-block scale);
it makes valid blocks, not llama-quantize's error-minimizing ones.

`python3 ggml_blocks.py DECODER` checks this decoder against the engine's (the qmpi_ggml_decode
test binary) on random blocks of every type, and that encode -> decode round-trips within each
type's error; tests/CMakeLists.txt runs it as kernels.ggml_blocks_numpy.

Cross-checked once against llama.cpp's own gguf-py decoder (not in ctest: that tree is not part of
the project), on 64 random blocks of every type, all equal (max |diff| 0, float32 cast):
  PYTHONPATH=/tmp/nlc/llama.cpp/gguf-py /usr/bin/python3 tests/reference/ggml_blocks.py --vs-gguf-py
"""

import sys

import numpy as np

# name: (ggml type id, elements per block, bytes per block)
TYPES = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "BF16": (30, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q2_K": (10, 256, 84),
    "Q3_K": (11, 256, 110),
    "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210),
}

# Byte offsets of each block's f16 scale fields (for random blocks with finite scales).
SCALE_FIELDS = {
    "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
    "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
}


def _f16(b: np.ndarray) -> np.ndarray:
    """The f16 in two byte columns, as float64 [nblocks, 1]."""
    return np.ascontiguousarray(b).view("<f2").astype(np.float64)


def _u32(b: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(b).view("<u4").astype(np.int64)


def _bits(v: np.ndarray, count: int) -> np.ndarray:
    """Bits 0..count-1 of each value: [..., count] appended as a new axis before the last."""
    return (v[..., None, :] >> np.arange(count)[:, None]) & 1


def _planes2(qs: np.ndarray) -> np.ndarray:
    """Q2_K/Q3_K's 2-bit planes: qs [n, 64] -> [n, 256] in element order (h, plane, l)."""
    q = qs.reshape(-1, 2, 1, 32).astype(np.int64)
    return ((q >> (2 * np.arange(4))[None, None, :, None]) & 3).reshape(-1, 256)


def _k_scales(s: np.ndarray):
    """Q4_K/Q5_K's eight 6-bit scales and mins from s [n, 12]."""
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | (s[:, 0:4] >> 6) << 4], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | (s[:, 4:8] >> 6) << 4], axis=1)
    return sc, mn


def _q3_scales(s: np.ndarray) -> np.ndarray:
    """Q3_K's sixteen signed scales from s [n, 12]."""
    s = s.astype(np.int64)
    low = np.concatenate([s[:, 0:8] & 15, s[:, 0:8] >> 4], axis=1)
    high = ((s[:, None, 8:12] >> (2 * np.arange(4))[None, :, None]) & 3).reshape(-1, 16)
    return (low | high << 4) - 32


def _nibbles32(qs: np.ndarray) -> np.ndarray:
    """qs [n, 16] -> [n, 32]: low nibbles are elements 0..15, high 16..31."""
    q = qs.astype(np.int64)
    return np.concatenate([q & 15, q >> 4], axis=1)


def _decode_blocks(name: str, b: np.ndarray) -> np.ndarray:
    """b [nblocks, block_bytes] uint8 -> [nblocks, block_elems] float64."""
    if name == "F32":
        return np.ascontiguousarray(b).view("<f4").astype(np.float64)
    if name == "F16":
        return _f16(b)
    if name == "BF16":
        return (np.ascontiguousarray(b).view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if name in ("Q4_0", "Q4_1"):
        off = 2 if name == "Q4_0" else 4
        q = _nibbles32(b[:, off:off + 16])
        if name == "Q4_0":
            return (q - 8) * _f16(b[:, 0:2])
        return q * _f16(b[:, 0:2]) + _f16(b[:, 2:4])
    if name in ("Q5_0", "Q5_1"):
        off = 2 if name == "Q5_0" else 4
        high = _bits(_u32(b[:, off:off + 4]), 32)[:, :, 0]
        q = _nibbles32(b[:, off + 4:off + 20]) | high << 4
        if name == "Q5_0":
            return (q - 16) * _f16(b[:, 0:2])
        return q * _f16(b[:, 0:2]) + _f16(b[:, 2:4])
    if name == "Q8_0":
        return b[:, 2:34].view(np.int8).astype(np.float64) * _f16(b[:, 0:2])
    if name == "Q2_K":
        sc = np.repeat(b[:, 0:16].astype(np.int64), 16, axis=1)
        q = _planes2(b[:, 16:80])
        return _f16(b[:, 80:82]) * (sc & 15) * q - _f16(b[:, 82:84]) * (sc >> 4)
    if name == "Q3_K":
        hbit = _bits(b[:, 0:32].astype(np.int64), 8).reshape(-1, 256)  # (4h + j, l) order
        q = _planes2(b[:, 32:96]) | hbit << 2
        sc = np.repeat(_q3_scales(b[:, 96:108]), 16, axis=1)
        return _f16(b[:, 108:110]) * sc * (q - 4)
    if name in ("Q4_K", "Q5_K"):
        sc, mn = _k_scales(b[:, 4:16])
        qs = b[:, 48:176] if name == "Q5_K" else b[:, 16:144]
        q = qs.reshape(-1, 4, 1, 32).astype(np.int64) >> np.array([0, 4])[None, None, :, None]
        q = (q & 15).reshape(-1, 256)
        if name == "Q5_K":
            q = q | _bits(b[:, 16:48].astype(np.int64), 8).reshape(-1, 256) << 4
        d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
        return d * np.repeat(sc, 32, axis=1) * q - dmin * np.repeat(mn, 32, axis=1)
    if name == "Q6_K":
        ql = b[:, 0:128].reshape(-1, 2, 2, 32).astype(np.int64)  # (h, k % 2, l)
        low = np.stack([ql & 15, ql >> 4], axis=2).reshape(-1, 2, 4, 32)  # (h, k // 2, k % 2)
        qh = b[:, 128:192].reshape(-1, 2, 1, 32).astype(np.int64)
        high = (qh >> (2 * np.arange(4))[None, None, :, None]) & 3
        q = (low | high << 4).reshape(-1, 256) - 32
        sc = np.repeat(b[:, 192:208].view(np.int8).astype(np.int64), 16, axis=1)
        return _f16(b[:, 208:210]) * sc * q
    raise ValueError(f"no decoder for {name}")


def dequantize(name: str, data: bytes, shape) -> np.ndarray:
    """A [rows, cols] tensor of type `name` from its bytes, as float64."""
    _, elems, nbytes = TYPES[name]
    rows, cols = shape
    if cols % elems:
        raise ValueError(f"{name}: {cols} columns are not whole blocks of {elems}")
    count = rows * cols // elems
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size != count * nbytes:
        raise ValueError(f"{name} [{rows}, {cols}] needs {count * nbytes} bytes, got {raw.size}")
    return _decode_blocks(name, raw.reshape(count, nbytes)).reshape(rows, cols)


# --- encoder -------------------------------------------------------------------------------

def _to_f16(v: np.ndarray) -> np.ndarray:
    """(f16 bytes [n, 2], the f16 values as float64 [n, 1])."""
    h = np.asarray(v, dtype=np.float64).reshape(-1).astype("<f2")
    return h.view(np.uint8).reshape(-1, 2), h.astype(np.float64)[:, None]


def _safe_div(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.divide(x, s, out=np.zeros(np.broadcast(x, s).shape), where=s != 0)


def _signed_max(x: np.ndarray) -> np.ndarray:
    """The element of largest magnitude along the last axis, sign kept: [..., 1]."""
    return np.take_along_axis(x, np.abs(x).argmax(axis=-1)[..., None], axis=-1)


def _pack_nibbles32(q: np.ndarray) -> np.ndarray:
    return (q[:, 0:16] | q[:, 16:32] << 4).astype(np.uint8)


def _pack_planes2(q: np.ndarray) -> np.ndarray:
    """Inverse of _planes2: q [n, 256] of 2-bit values -> qs [n, 64]."""
    p = q.reshape(-1, 2, 4, 32) << (2 * np.arange(4))[None, None, :, None]
    return p.sum(axis=2).reshape(-1, 64).astype(np.uint8)


def _pack_bits(bits: np.ndarray, count: int) -> np.ndarray:
    """bits [n, count, m] of 0/1 -> [n, m] with bit i from bits[:, i]."""
    return (bits << np.arange(count)[None, :, None]).sum(axis=1)


def _min_quant(x: np.ndarray, levels: int):
    """(scale, positive min) per row of x for w = q scale - min with q in 0..levels."""
    m = -np.minimum(x.min(axis=-1), 0.0)
    s = np.maximum(x.max(axis=-1) + m, 0.0) / levels
    return s, m


def _encode_blocks(name: str, x: np.ndarray) -> np.ndarray:
    """x [nblocks, block_elems] -> [nblocks, block_bytes] uint8."""
    n = x.shape[0]
    if name == "F32":
        return x.astype("<f4").view(np.uint8)
    if name == "F16":
        return x.astype("<f2").view(np.uint8)
    if name == "BF16":
        u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even (finite inputs)
        return u.astype("<u2").view(np.uint8)
    if name in ("Q4_0", "Q5_0", "Q8_0"):
        low, high = {"Q4_0": (-8, 7), "Q5_0": (-16, 15), "Q8_0": (-127, 127)}[name]
        if name == "Q8_0":
            d = np.abs(x).max(axis=1) / 127.0
        else:
            d = _signed_max(x)[:, 0] / low  # the largest magnitude lands on the lowest level
        db, d = _to_f16(d)
        q = np.clip(np.round(_safe_div(x, d)), low, high).astype(np.int64)
        if name == "Q8_0":
            return np.concatenate([db, q.astype(np.int8).view(np.uint8)], axis=1)
        q = q - low
        if name == "Q4_0":
            return np.concatenate([db, _pack_nibbles32(q)], axis=1)
        qh = _pack_bits((q >> 4)[:, :, None], 32)[:, 0].astype("<u4").view(np.uint8).reshape(n, 4)
        return np.concatenate([db, qh, _pack_nibbles32(q & 15)], axis=1)
    if name in ("Q4_1", "Q5_1"):
        levels = 15 if name == "Q4_1" else 31
        mn, mx = x.min(axis=1), x.max(axis=1)
        db, d = _to_f16((mx - mn) / levels)
        mb, m = _to_f16(mn)
        q = np.clip(np.round(_safe_div(x - m, d)), 0, levels).astype(np.int64)
        if name == "Q4_1":
            return np.concatenate([db, mb, _pack_nibbles32(q)], axis=1)
        qh = _pack_bits((q >> 4)[:, :, None], 32)[:, 0].astype("<u4").view(np.uint8).reshape(n, 4)
        return np.concatenate([db, mb, qh, _pack_nibbles32(q & 15)], axis=1)
    if name in ("Q2_K", "Q4_K", "Q5_K"):
        sub, levels, smax = {"Q2_K": (16, 3, 15), "Q4_K": (32, 15, 63), "Q5_K": (32, 31, 63)}[name]
        xs = x.reshape(n, 256 // sub, sub)
        s, m = _min_quant(xs, levels)
        db, d = _to_f16(s.max(axis=1) / smax)
        mb, dmin = _to_f16(m.max(axis=1) / smax)
        sc = np.clip(np.round(_safe_div(s, d)), 0, smax).astype(np.int64)
        mq = np.clip(np.round(_safe_div(m, dmin)), 0, smax).astype(np.int64)
        es, em = (d * sc)[:, :, None], (dmin * mq)[:, :, None]
        q = np.clip(np.round(_safe_div(xs + em, es)), 0, levels).astype(np.int64).reshape(n, 256)
        if name == "Q2_K":
            return np.concatenate([(sc | mq << 4).astype(np.uint8), _pack_planes2(q), db, mb],
                                  axis=1)
        packed = np.concatenate([sc[:, 0:4] | (sc[:, 4:8] >> 4) << 6,
                                 mq[:, 0:4] | (mq[:, 4:8] >> 4) << 6,
                                 (sc[:, 4:8] & 15) | (mq[:, 4:8] & 15) << 4], axis=1).astype(np.uint8)
        qs = (q.reshape(n, 4, 2, 32) & 15) << np.array([0, 4])[None, None, :, None]
        qs = qs.sum(axis=2).reshape(n, 128).astype(np.uint8)
        if name == "Q4_K":
            return np.concatenate([db, mb, packed, qs], axis=1)
        qh = _pack_bits((q >> 4).reshape(n, 8, 32), 8).astype(np.uint8)
        return np.concatenate([db, mb, packed, qh, qs], axis=1)
    if name in ("Q3_K", "Q6_K"):
        low, high, smax = {"Q3_K": (-4, 3, 31), "Q6_K": (-32, 31, 127)}[name]
        xs = x.reshape(n, 16, 16)
        s = _signed_max(xs)[:, :, 0] / low
        db, d = _to_f16(np.abs(s).max(axis=1) / smax)
        sc = np.clip(np.round(_safe_div(s, d)), -smax, smax).astype(np.int64)
        q = np.clip(np.round(_safe_div(xs, (d * sc)[:, :, None])), low, high).astype(np.int64)
        q = q.reshape(n, 256) - low
        if name == "Q6_K":
            lo = (q & 15).reshape(n, 2, 2, 2, 32)  # (h, k // 2, k % 2, l)
            ql = (lo[:, :, 0] | lo[:, :, 1] << 4).reshape(n, 128)
            hi = (q >> 4).reshape(n, 2, 4, 32) << (2 * np.arange(4))[None, None, :, None]
            qh = hi.sum(axis=2).reshape(n, 64)
            return np.concatenate([ql.astype(np.uint8), qh.astype(np.uint8),
                                   sc.astype(np.int8).view(np.uint8), db], axis=1)
        u = sc + 32
        top = (u >> 4).reshape(n, 4, 4) << (2 * np.arange(4))[None, :, None]  # (j // 4, j % 4)
        scales = np.concatenate([(u[:, 0:8] & 15) | (u[:, 8:16] & 15) << 4, top.sum(axis=1)],
                                axis=1).astype(np.uint8)
        hmask = _pack_bits((q >> 2).reshape(n, 8, 32), 8).astype(np.uint8)
        return np.concatenate([hmask, _pack_planes2(q & 3), scales, db], axis=1)
    raise ValueError(f"no encoder for {name}")


def quantize(name: str, x) -> bytes:
    """The bytes of a [rows, cols] float array as a tensor of type `name`."""
    x = np.asarray(x, dtype=np.float64)
    _, elems, _ = TYPES[name]
    rows, cols = x.shape
    if cols % elems:
        raise ValueError(f"{name}: {cols} columns are not whole blocks of {elems}")
    return _encode_blocks(name, x.reshape(-1, elems)).tobytes()


# --- checks (python3 ggml_blocks.py DECODER | --vs-gguf-py) --------------------------------

# Round trip of normal(0, 1) values: the largest RMS error each encoder may leave (a little above
# what these encoders give: Q2_K 0.32, Q3_K 0.16, Q4_* 0.08, Q5_* 0.04, Q6_K 0.019, Q8_0 0.005).
ROUND_TRIP_RMS = {
    "F32": 1e-7, "F16": 4e-4, "BF16": 3e-3, "Q8_0": 0.008, "Q6_K": 0.03, "Q5_0": 0.06,
    "Q5_1": 0.06, "Q5_K": 0.06, "Q4_0": 0.12, "Q4_1": 0.12, "Q4_K": 0.12, "Q3_K": 0.22,
    "Q2_K": 0.42,
}


def random_blocks(name: str, count: int, rng) -> bytes:
    """`count` blocks of random bytes whose f16 scales are finite (plain floats from normals)."""
    _, elems, nbytes = TYPES[name]
    if elems == 1:
        return quantize(name, rng.normal(size=(1, count)))
    b = rng.integers(0, 256, size=(count, nbytes), dtype=np.uint8)
    for off in SCALE_FIELDS[name]:
        b[:, off:off + 2] = _to_f16(rng.uniform(-2.0, 2.0, size=count))[0]
    return b.tobytes()


def check_engine_decoder(decoder: str, rng) -> list:
    """The engine's decoder (a binary: TYPE on argv, blocks on stdin, float32 on stdout) against
    this one on random blocks of every type."""
    import subprocess
    failures = []
    for name, (_, elems, _) in TYPES.items():
        data = random_blocks(name, 96, rng)
        want = dequantize(name, data, (1, 96 * elems))[0]
        run = subprocess.run([decoder, name], input=data, capture_output=True, timeout=60)
        if run.returncode != 0:
            failures.append(f"{name}: {decoder} failed: {run.stderr.decode()[-400:]}")
            continue
        got = np.frombuffer(run.stdout, dtype="<f4").astype(np.float64)
        # float32 arithmetic against float64: a few ulps of each block's largest value.
        scale = np.abs(want.reshape(-1, elems)).max(axis=1).repeat(elems) + 1e-30
        err = np.abs(got - want) / scale if got.shape == want.shape else np.array([np.inf])
        print(f"{name:5} engine vs numpy: max err {err.max():.2e} of the block's largest value")
        if not err.max() <= 1e-6:
            failures.append(f"{name}: engine decoder differs by {err.max():.3g}")
    return failures


# The types with an int8-activation GEMV (kernels/cpu/matmul_ggml_int8.cpp).
INT8_GEMV_TYPES = ("Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q6_K")


def check_engine_int8_gemv(decoder: str, rng) -> list:
    """The engine's int8-activation GEMV (the decoder binary with --int8-gemv) against the float64
    product of this decoder's weights: x quantized per 32-block moves each activation by at most
    half its block's step max|x_b| / 127, so |got - exact| <= sum_b max|x_b| / 254 * sum |w_b|,
    plus float32 rounding (1e-5 of sum |w x|)."""
    import subprocess
    failures, absent = [], []
    rows, cols, n = 6, 512, 5
    for name in INT8_GEMV_TYPES:
        _, elems, _ = TYPES[name]
        data = random_blocks(name, rows * cols // elems, rng)
        w = dequantize(name, data, (rows, cols))
        x = rng.normal(size=(n, cols)).astype(np.float32)
        x[:, ::41] *= 30.0  # outliers: the small activations of their blocks lose most bits
        run = subprocess.run([decoder, name, "--int8-gemv", str(rows), str(cols), str(n)],
                             input=data + x.tobytes(), capture_output=True, timeout=60)
        if run.returncode == 3:  # a build without int8 dot products: the engine never runs it
            print(f"{name:5} int8 GEMV: not in this build ({run.stderr.decode().strip()})")
            absent.append(name)
            continue
        if run.returncode != 0:
            failures.append(f"{name}: {decoder} --int8-gemv failed: {run.stderr.decode()[-400:]}")
            continue
        got = np.frombuffer(run.stdout, dtype="<f4").astype(np.float64).reshape(n, rows)
        x64 = x.astype(np.float64)
        exact = x64 @ w.T
        amax = np.abs(x64).reshape(n, -1, 32).max(axis=2)           # [n, blocks]
        wsum = np.abs(w).reshape(rows, -1, 32).sum(axis=2)          # [rows, blocks]
        bound = amax / 254.0 @ wsum.T + 1e-5 * (np.abs(x64) @ np.abs(w).T)
        ratio = float((np.abs(got - exact) / bound).max())
        rel = float(np.abs(got - exact).max() / np.abs(exact).max())
        print(f"{name:5} int8 GEMV vs float64: max err {rel:.2e} of the largest output, "
              f"{ratio:.2f} of the stated bound")
        if not ratio <= 1.0:
            failures.append(f"{name}: int8 GEMV error is {ratio:.3g} times its bound")
    if absent and len(absent) != len(INT8_GEMV_TYPES):  # the kernel is there for all or none
        failures.append(f"int8 GEMV missing for {', '.join(absent)} only")
    return failures


def check_round_trips(rng) -> list:
    failures = []
    for name, (_, elems, _) in TYPES.items():
        x = rng.normal(size=(5, 3 * 256))
        y = dequantize(name, quantize(name, x), x.shape)
        rms = float(np.sqrt(np.mean((x - y) ** 2)))
        print(f"{name:5} round trip: rms err {rms:.4f} (bound {ROUND_TRIP_RMS[name]})")
        if not rms <= ROUND_TRIP_RMS[name]:
            failures.append(f"{name}: round trip rms error {rms:.4g} > {ROUND_TRIP_RMS[name]}")
        # Constant and all-zero rows are edge cases of every scale choice.
        z = np.zeros((1, 256))
        if np.abs(dequantize(name, quantize(name, z), z.shape)).max() != 0:
            failures.append(f"{name}: zeros do not round-trip to zeros")
    return failures


def check_vs_gguf_py(rng) -> list:
    """This decoder against llama.cpp's gguf-py (gguf.quants.dequantize) on PYTHONPATH."""
    from gguf import GGMLQuantizationType, quants
    failures = []
    for name, (_, elems, nbytes) in TYPES.items():
        data = random_blocks(name, 64, rng)
        want = dequantize(name, data, (1, 64 * elems))[0]
        theirs = quants.dequantize(np.frombuffer(data, dtype=np.uint8).reshape(1, -1),
                                   GGMLQuantizationType[name]).astype(np.float64).reshape(-1)
        diff = np.abs(theirs - want.astype(np.float32)).max()
        print(f"{name:5} numpy vs gguf-py: max |diff| {diff:.3g}")
        if diff != 0:
            failures.append(f"{name}: differs from gguf-py by {diff:.3g}")
    return failures


if __name__ == "__main__":
    generator = np.random.default_rng(35)
    if sys.argv[1:] == ["--vs-gguf-py"]:
        problems = check_vs_gguf_py(generator)
    elif len(sys.argv) == 2:
        problems = (check_engine_decoder(sys.argv[1], generator) + check_round_trips(generator) +
                    check_engine_int8_gemv(sys.argv[1], generator))
    else:
        sys.exit("usage: ggml_blocks.py DECODER_BINARY | --vs-gguf-py")
    for p in problems:
        print("FAIL", p)
    sys.exit(1 if problems else 0)
