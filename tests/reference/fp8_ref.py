"""The reference's own FP8 decoding: block-wise e4m3 checkpoints back to float64 weights.

Written from the format description, sharing nothing with the engine. e4m3 ("e4m3fn") is one
sign bit, 4 exponent bits with bias 7 and 3 mantissa bits; exponent 0 is subnormal
(m / 8 * 2^-6), there are no infinities, S.1111.111 is NaN and the largest finite value is 448.
A quantized projection stores `.weight` as F8_E4M3 [out, in] and `.weight_scale_inv` float32
[ceil(out / bn), ceil(in / bk)] for weight_block_size [bn, bk]; W[r][c] = e4m3(q) * s of its block.
"""

import numpy as np


def e4m3_value(code: int) -> float:
    """One e4m3 byte as a float (NaN for the two NaN codes)."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> 3) & 0xF
    mantissa = code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return float("nan")
    if exponent == 0:
        return sign * (mantissa / 8.0) * 2.0 ** -6
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)


E4M3 = np.array([e4m3_value(c) for c in range(256)], dtype=np.float64)
assert E4M3[0x7E] == 448.0 and E4M3[0x01] == 2.0 ** -9 and np.isnan(E4M3[0xFF])


def dequantize(codes, scale_inv, block) -> np.ndarray:
    """One projection's float64 weight [out, in] from its e4m3 codes and block scales."""
    codes = np.asarray(codes, dtype=np.int64)
    scale_inv = np.asarray(scale_inv, dtype=np.float64)
    bn, bk = block
    rows, cols = codes.shape
    want = (-(-rows // bn), -(-cols // bk))
    if scale_inv.shape != want:
        raise ValueError(f"scale_inv shape {scale_inv.shape}, blocks of {bn}x{bk} need {want}")
    values = E4M3[codes]
    if np.isnan(values).any():
        raise ValueError("e4m3 NaN code in a weight")
    full = np.repeat(np.repeat(scale_inv, bn, axis=0), bk, axis=1)[:rows, :cols]
    return values * full


def dequantize_tensors(tensors: dict, quant: dict) -> dict:
    """The checkpoint's tensors with every FP8 projection replaced by its float64 `.weight`."""
    if quant.get("fmt", "e4m3") != "e4m3" or quant.get("activation_scheme") != "dynamic":
        raise ValueError(f"the reference reads dynamic e4m3 checkpoints, not {quant}")
    block = tuple(int(b) for b in quant["weight_block_size"])
    out = {}
    for name, value in tensors.items():
        if name.endswith("_scale_inv"):
            continue
        scale = tensors.get(name + "_scale_inv")
        out[name] = value if scale is None else dequantize(value, scale, block)
    return out
