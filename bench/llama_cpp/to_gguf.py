#!/usr/bin/python3
"""Writes a Qwen2 checkpoint (Hugging Face folder: config.json, safetensors, tokenizer.json) as one
GGUF file that llama.cpp loads, for the external baseline in bench/llama_cpp/. The weights are
copied byte for byte (bf16 matrices stay bf16; vectors become float32, as llama.cpp keeps them),
so both engines multiply the same numbers.

Written from the GGUF format description (version 3): a header, metadata key/values, tensor
descriptors with offsets into a data section aligned to 32 bytes. Dimensions are listed
innermost first, so a [rows, cols] matrix is written as (cols, rows).

    /usr/bin/python3 bench/llama_cpp/to_gguf.py MODEL_DIR OUT.gguf
"""

import json
import os
import struct
import sys

# The test oracle's safetensors reader: its header checks, and its decoding of vectors.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "reference"))
import safetensors_ref  # noqa: E402

ALIGN = 32
# metadata value types
U32, I32, F32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
# tensor types, by safetensors dtype
GGML_TYPE = {"F32": 0, "F16": 1, "BF16": 30}
# llama.cpp's token types
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5


def gguf_string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind: int, v) -> bytes:
    if kind == U32:
        return struct.pack("<I", v)
    if kind == I32:
        return struct.pack("<i", v)
    if kind == F32:
        return struct.pack("<f", v)
    if kind == BOOL:
        return struct.pack("<B", 1 if v else 0)
    if kind == STRING:
        return gguf_string(v)
    raise ValueError(kind)


def gguf_kv(key: str, kind: int, v, elem: int = 0) -> bytes:
    out = gguf_string(key) + struct.pack("<I", kind)
    if kind != ARRAY:
        return out + gguf_value(kind, v)
    return out + struct.pack("<IQ", elem, len(v)) + b"".join(gguf_value(elem, e) for e in v)


class Safetensors:
    """Tensor name -> (file, dtype, shape, byte offset, byte length), over every shard; the
    bytes are read one tensor at a time (a whole checkpoint as float64 would not fit)."""

    def __init__(self, model_dir: str):
        index = os.path.join(model_dir, safetensors_ref.INDEX_NAME)
        files = (sorted(set(json.load(open(index))["weight_map"].values()))
                 if os.path.exists(index) else [safetensors_ref.SINGLE_NAME])
        self.tensors = {}
        for f in files:
            path = os.path.join(model_dir, f)
            header, data_start, _ = safetensors_ref.read_header(path)
            for name, t in header.items():
                b, e = t["data_offsets"]
                self.tensors[name] = (path, t["dtype"], t["shape"], data_start + b, e - b)

    def read(self, name: str) -> bytes:
        path, _, _, off, size = self.tensors[name]
        with open(path, "rb") as fh:
            fh.seek(off)
            return fh.read(size)


def tensor_plan(cfg: dict, st: Safetensors):
    """(gguf name, hf name) in llama.cpp's qwen2 naming."""
    plan = [("token_embd.weight", "model.embed_tokens.weight")]
    per_layer = [("attn_norm.weight", "input_layernorm.weight"),
                 ("attn_q.weight", "self_attn.q_proj.weight"),
                 ("attn_q.bias", "self_attn.q_proj.bias"),
                 ("attn_k.weight", "self_attn.k_proj.weight"),
                 ("attn_k.bias", "self_attn.k_proj.bias"),
                 ("attn_v.weight", "self_attn.v_proj.weight"),
                 ("attn_v.bias", "self_attn.v_proj.bias"),
                 ("attn_output.weight", "self_attn.o_proj.weight"),
                 ("ffn_norm.weight", "post_attention_layernorm.weight"),
                 ("ffn_gate.weight", "mlp.gate_proj.weight"),
                 ("ffn_up.weight", "mlp.up_proj.weight"),
                 ("ffn_down.weight", "mlp.down_proj.weight")]
    for i in range(cfg["num_hidden_layers"]):
        plan += [(f"blk.{i}.{g}", f"model.layers.{i}.{h}") for g, h in per_layer]
    plan.append(("output_norm.weight", "model.norm.weight"))
    if "lm_head.weight" in st.tensors and not cfg.get("tie_word_embeddings", False):
        plan.append(("output.weight", "lm_head.weight"))
    return plan


def vocabulary(model_dir: str, vocab_size: int):
    tok = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [UNUSED] * vocab_size
    for text, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = text, NORMAL
    for a in tok.get("added_tokens", []):
        tokens[a["id"]], types[a["id"]] = a["content"], CONTROL if a["special"] else USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    return tokens, types, merges


def main(model_dir: str, out_path: str) -> int:
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    if cfg["architectures"][0] != "Qwen2ForCausalLM":
        sys.exit(f"to_gguf.py writes Qwen2ForCausalLM, not {cfg['architectures'][0]}")
    st = Safetensors(model_dir)
    tokens, types, merges = vocabulary(model_dir, cfg["vocab_size"])
    a = "qwen2"
    kvs = [
        gguf_kv("general.architecture", STRING, a),
        gguf_kv("general.name", STRING, os.path.basename(os.path.normpath(model_dir))),
        gguf_kv("general.alignment", U32, ALIGN),
        gguf_kv(f"{a}.block_count", U32, cfg["num_hidden_layers"]),
        gguf_kv(f"{a}.context_length", U32, cfg["max_position_embeddings"]),
        gguf_kv(f"{a}.embedding_length", U32, cfg["hidden_size"]),
        gguf_kv(f"{a}.feed_forward_length", U32, cfg["intermediate_size"]),
        gguf_kv(f"{a}.attention.head_count", U32, cfg["num_attention_heads"]),
        gguf_kv(f"{a}.attention.head_count_kv", U32, cfg["num_key_value_heads"]),
        gguf_kv(f"{a}.rope.freq_base", F32, float(cfg["rope_theta"])),
        gguf_kv(f"{a}.attention.layer_norm_rms_epsilon", F32, float(cfg["rms_norm_eps"])),
        gguf_kv("tokenizer.ggml.model", STRING, "gpt2"),
        gguf_kv("tokenizer.ggml.pre", STRING, "qwen2"),
        gguf_kv("tokenizer.ggml.tokens", ARRAY, tokens, STRING),
        gguf_kv("tokenizer.ggml.token_type", ARRAY, types, I32),
        gguf_kv("tokenizer.ggml.merges", ARRAY, merges, STRING),
        gguf_kv("tokenizer.ggml.eos_token_id", U32, int(cfg.get("eos_token_id", 151643))),
        gguf_kv("tokenizer.ggml.bos_token_id", U32, int(cfg.get("bos_token_id", 151643))),
        gguf_kv("tokenizer.ggml.padding_token_id", U32, int(cfg.get("bos_token_id", 151643))),
        gguf_kv("tokenizer.ggml.add_bos_token", BOOL, False),
    ]
    infos, blobs, offset = [], [], 0
    for gname, hname in tensor_plan(cfg, st):
        _, dtype, shape, _, _ = st.tensors[hname]
        raw = st.read(hname)
        if len(shape) == 1:
            # exact: bf16, f16 and f32 values all pass through float64 unchanged
            raw, kind = safetensors_ref.decode(raw, dtype).astype("<f4").tobytes(), GGML_TYPE["F32"]
        else:
            kind = GGML_TYPE[dtype]
        dims = list(reversed(shape))
        infos.append(gguf_string(gname) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) +
                     struct.pack("<IQ", kind, offset))
        pad = (-len(raw)) % ALIGN
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kvs)) + b"".join(kvs) + b"".join(infos)
    tmp = out_path + ".part"
    with open(tmp, "wb") as f:
        f.write(head + b"\0" * ((-len(head)) % ALIGN))
        for b in blobs:
            f.write(b)
    os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
