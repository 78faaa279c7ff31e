"""K and V as the engine's KV cache stores them (kernels/kv_dtype.h), for the reference.

f32 keeps the values; bf16 rounds each float32 to nearest even; fp8 scales each (token,
KV head) vector by its largest |x| / 448 (in float32) and rounds x / scale to e4m3 (nearest
even, saturating at 448). The engine computes K and V in float32 and rounds those, so the
reference rounds its float64 values through float32 first.
"""

import numpy as np

E4M3_MAX = 448.0


def bf16(x: np.ndarray) -> np.ndarray:
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def e4m3(y: np.ndarray) -> np.ndarray:
    """Nearest e4m3 value (ties to even, saturating) of each element, as float64."""
    a = np.abs(np.asarray(y, dtype=np.float64))
    _, ex = np.frexp(a)  # a = m 2^ex with m in [0.5, 1): binade 2^(ex-1)
    step = np.ldexp(1.0, np.maximum(ex - 1, -6) - 3)  # 3 mantissa bits; subnormals step 2^-9
    q = np.minimum(np.round(a / step) * step, E4M3_MAX)  # np.round: half to even
    return np.sign(y) * q


def fp8(x: np.ndarray) -> np.ndarray:
    """x [..., head_dim]: each vector over the last axis with its own scale."""
    x32 = np.asarray(x, dtype=np.float32)
    amax = np.max(np.abs(x32), axis=-1, keepdims=True)
    scale = np.where(amax > 0, amax / np.float32(E4M3_MAX), np.float32(1)).astype(np.float32)
    return e4m3((x32 / scale).astype(np.float32)) * scale.astype(np.float64)


ROUNDING = {"f32": lambda x: x, "bf16": bf16, "fp8": fp8}
