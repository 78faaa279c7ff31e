"""The reference's own int4 unpacking: AWQ (GEMM) and GPTQ checkpoints back to float weights.

Written from the format description (qwen-facts.md section 6), sharing nothing with the
engine: a quantized projection's qweight / qzeros / scales (/ g_idx) become the float64
`.weight` [out, in] that the float forward pass multiplies, W[k][n] = (q - z) * s of k's group.

    AWQ  qweight [K, N/8]: word c of row k holds column 8c + ORDER[i] in bits 4i..4i+3,
         ORDER = 0 2 4 6 1 3 5 7; qzeros [K/g, N/8] packed the same way, zeros as stored;
         group of input k is k // g.
    GPTQ qweight [K/8, N]: word r of column n holds input row 8r + j in bits 4j..4j+3;
         qzeros [G, N/8]: column 8c + j in bits 4j..; stored zero + 1 is the zero point;
         group of input k is g_idx[k] (act-order permutes them).
"""

import numpy as np

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def nibbles(words: np.ndarray) -> np.ndarray:
    """int32 words [..., W] -> their eight 4-bit fields [..., W, 8], field i from bits 4i."""
    u = np.asarray(words, dtype=np.int64) & 0xFFFFFFFF
    shifts = 4 * np.arange(8, dtype=np.int64)
    return (u[..., None] >> shifts) & 0xF


def awq_columns(words: np.ndarray) -> np.ndarray:
    """AWQ-packed [R, N/8] -> values [R, N] in natural column order."""
    fields = nibbles(words)  # [R, N/8, 8], field i is column 8c + AWQ_ORDER[i]
    out = np.empty_like(fields)
    for i, col in enumerate(AWQ_ORDER):
        out[:, :, col] = fields[:, :, i]
    return out.reshape(words.shape[0], -1)


def sequential_columns(words: np.ndarray) -> np.ndarray:
    """Sequentially packed [R, N/8] -> [R, N]."""
    return nibbles(words).reshape(words.shape[0], -1)


def dequantize(method: str, qweight, qzeros, scales, g_idx, group_size: int) -> np.ndarray:
    """One projection's float64 weight [out, in] (nn.Linear's layout)."""
    scales = np.asarray(scales, dtype=np.float64)
    if method == "awq":
        q = awq_columns(qweight)  # [K, N]
        zeros = awq_columns(qzeros)  # [G, N]
        k_rows = q.shape[0]
        group = np.arange(k_rows) // (k_rows if group_size < 0 else group_size)
    elif method == "gptq":
        fields = nibbles(qweight)  # [K/8, N, 8]: field j is input row 8r + j
        q = fields.transpose(0, 2, 1).reshape(-1, qweight.shape[1])  # [K, N]
        zeros = sequential_columns(qzeros) + 1
        group = np.asarray(g_idx, dtype=np.int64)
        if group.min() < 0 or group.max() >= scales.shape[0]:
            raise ValueError(f"g_idx names groups outside [0, {scales.shape[0]})")
    else:
        raise ValueError(f"quant_method {method} is not AWQ or GPTQ")
    w = (q - zeros[group]) * scales[group]  # [K, N]
    return w.T.copy()


def dequantize_tensors(tensors: dict, quant: dict) -> dict:
    """The checkpoint's tensors with every int4 projection replaced by its float `.weight`."""
    method = quant["quant_method"]
    if int(quant.get("bits", 4)) != 4:
        raise ValueError(f"bits {quant.get('bits')}: the reference reads 4-bit checkpoints")
    group_size = int(quant.get("group_size", 128))
    out = {}
    for name, value in tensors.items():
        if not name.endswith(".qweight"):
            if not name.endswith((".qzeros", ".scales", ".g_idx")):
                out[name] = value
            continue
        prefix = name[: -len(".qweight")]
        out[prefix + ".weight"] = dequantize(method, value, tensors[prefix + ".qzeros"],
                                             tensors[prefix + ".scales"],
                                             tensors.get(prefix + ".g_idx"), group_size)
    return out
