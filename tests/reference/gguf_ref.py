#!/usr/bin/python3
"""The test oracle's GGUF writer and reader, written from the GGUF format description
(version 3): a header ("GGUF", u32 version, u64 tensor count, u64 key/value count), metadata
key/values, tensor descriptors (name, dims innermost first, ggml type, offset into the data
section), padding to general.alignment (32), the data section. A [rows, cols] matrix is written
with dims (cols, rows); a sparse layer's experts are stacked as llama.cpp does
(blk.N.ffn_gate_exps.weight: dims (cols, rows, experts)), its routers kept in float32.

Writer: a Hugging Face Qwen2/Qwen3/Qwen2-MoE/Qwen3-MoE checkpoint (config.json, safetensors,
tokenizer.json) as a GGUF file under llama.cpp's names, with the tokenizer embedded
(tokenizer.ggml.*; left out when the tokenizer has more ids than the embedding rows). Vectors
(norms, biases) are float32, as llama.cpp keeps them. Matrices are copied byte for byte in the
checkpoint's dtype unless a type is asked for, then quantized with ggml_blocks.quantize:

    --type T          every matrix (q/k/v/o, gate/up/down) as T (Q8_0, Q4_K, Q6_K, BF16...)
    --embed-type T    token_embd (default: --type)
    --output-type T   output, the untied head (default: --type)
    --mix q4_k_m      a Q4_K_M-like mix: matrices Q4_K, attn_v and ffn_down Q6_K, token_embd
                      and output Q6_K (llama-quantize's Q4_K_M gives Q6_K to only half the
                      attn_v/ffn_down layers; here all, for a simple rule)
    --split N         N files NAME-0000i-of-0000N.gguf, tensors dealt out in order, the
                      metadata in the first (llama.cpp's gguf-split layout: split.no,
                      split.count, split.tensors.count)

A matrix whose rows are not whole blocks of its type falls back as llama-quantize does: Q2_K,
Q3_K, Q4_K to Q5_0; Q5_K to Q5_1; Q6_K to Q8_0; a 32-element type to F32 when rows are not whole
32-element blocks either.

Reader: read(path) -> (metadata dict, {gguf name: (type name, shape outermost first, bytes)});
hf_tensors(path) -> {Hugging Face name: float64 array} decoded with ggml_blocks.dequantize, for
the float64 reference forward. Split files are read as one when given the first part.

    /usr/bin/python3 tests/reference/gguf_ref.py MODEL_DIR OUT.gguf [--type T] [--mix q4_k_m] ...
"""

import argparse
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_blocks  # noqa: E402
import safetensors_ref  # noqa: E402

ALIGN = 32
# metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# llama.cpp's token types
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
TYPE_NAME = {v[0]: k for k, v in ggml_blocks.TYPES.items()}
FALLBACK = {"Q2_K": "Q5_0", "Q3_K": "Q5_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
ARCH = {"Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
        "Qwen2MoeForCausalLM": "qwen2moe", "Qwen3MoeForCausalLM": "qwen3moe"}

# (gguf, hf) outside the layers and inside layer N (blk.N. / model.layers.N.)
MODEL_NAMES = [("token_embd.weight", "model.embed_tokens.weight"),
               ("output_norm.weight", "model.norm.weight"),
               ("output.weight", "lm_head.weight")]
LAYER_NAMES = [("attn_norm.weight", "input_layernorm.weight"),
               ("attn_q.weight", "self_attn.q_proj.weight"),
               ("attn_q.bias", "self_attn.q_proj.bias"),
               ("attn_k.weight", "self_attn.k_proj.weight"),
               ("attn_k.bias", "self_attn.k_proj.bias"),
               ("attn_v.weight", "self_attn.v_proj.weight"),
               ("attn_v.bias", "self_attn.v_proj.bias"),
               ("attn_output.weight", "self_attn.o_proj.weight"),
               ("attn_q_norm.weight", "self_attn.q_norm.weight"),
               ("attn_k_norm.weight", "self_attn.k_norm.weight"),
               ("ffn_norm.weight", "post_attention_layernorm.weight"),
               ("ffn_gate.weight", "mlp.gate_proj.weight"),
               ("ffn_up.weight", "mlp.up_proj.weight"),
               ("ffn_down.weight", "mlp.down_proj.weight"),
               ("ffn_gate_inp.weight", "mlp.gate.weight"),
               ("ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"),
               ("ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"),
               ("ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"),
               ("ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight")]
# A sparse layer's experts, stacked into one [experts, rows, cols] tensor each.
EXPERT_NAMES = [("ffn_gate_exps.weight", "gate_proj.weight"),
                ("ffn_up_exps.weight", "up_proj.weight"),
                ("ffn_down_exps.weight", "down_proj.weight")]
# Kept in float32 however the matrices are quantized (llama-quantize leaves routers alone).
FLOAT_ONLY = re.compile(r"ffn_gate_inp(_shexp)?\.weight$")


# --- writing ---------------------------------------------------------------------------------

def gguf_string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind: int, v) -> bytes:
    if kind == STRING:
        return gguf_string(v)
    if kind == BOOL:
        return struct.pack("<B", 1 if v else 0)
    return struct.pack(_SCALAR[kind], v)


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
    """(gguf name, hf name) of every checkpoint tensor, in llama.cpp's naming; a stacked
    expert tensor has the list of its experts' hf names."""
    plan = [MODEL_NAMES[0]]
    experts = cfg.get("num_experts", 0)
    for i in range(cfg["num_hidden_layers"]):
        plan += [(f"blk.{i}.{g}", f"model.layers.{i}.{h}") for g, h in LAYER_NAMES
                 if f"model.layers.{i}.{h}" in st.tensors]
        for g, h in EXPERT_NAMES:
            names = [f"model.layers.{i}.mlp.experts.{e}.{h}" for e in range(experts)]
            if names and names[0] in st.tensors:
                plan.append((f"blk.{i}.{g}", names))
    plan.append(MODEL_NAMES[1])
    if "lm_head.weight" in st.tensors and not cfg.get("tie_word_embeddings", False):
        plan.append(MODEL_NAMES[2])
    return plan


def vocabulary(model_dir: str, vocab_size: int):
    tok = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok.get("added_tokens", [])]
    if max(ids) >= vocab_size:
        return None, None, None
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [UNUSED] * vocab_size
    for text, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = text, NORMAL
    for a in tok.get("added_tokens", []):
        tokens[a["id"]], types[a["id"]] = a["content"], CONTROL if a["special"] else USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    return tokens, types, merges


def chat_template(model_dir: str):
    path = os.path.join(model_dir, "tokenizer_config.json")
    if not os.path.exists(path):
        return None
    return json.load(open(path)).get("chat_template")


def choose_type(gname: str, dtype: str, ncols: int, args) -> str:
    """The ggml type of matrix `gname` (rows of `ncols` elements) under the options."""
    want = args.type
    if args.mix == "q4_k_m":
        want = "Q6_K" if re.search(r"(attn_v|ffn_down)\.weight$", gname) else "Q4_K"
    if gname == "token_embd.weight":
        want = args.embed_type or ("Q6_K" if args.mix == "q4_k_m" else want)
    if gname == "output.weight":
        want = args.output_type or ("Q6_K" if args.mix == "q4_k_m" else want)
    if not want:
        return dtype  # byte for byte
    while ncols % ggml_blocks.TYPES[want][1]:
        want = FALLBACK.get(want, "F32")
    return want


def encode(raw: bytes, dtype: str, shape, kind: str) -> bytes:
    if kind == dtype:
        return raw
    values = safetensors_ref.decode(raw, dtype).reshape(-1, shape[-1])
    return ggml_blocks.quantize(kind, values)


def metadata(cfg: dict, model_dir: str, arch: str, n_layers: int) -> list:
    kvs = [
        gguf_kv("general.architecture", STRING, arch),
        gguf_kv("general.name", STRING, os.path.basename(os.path.normpath(model_dir))),
        gguf_kv("general.alignment", U32, ALIGN),
        gguf_kv(f"{arch}.block_count", U32, n_layers),
        gguf_kv(f"{arch}.context_length", U32, cfg["max_position_embeddings"]),
        gguf_kv(f"{arch}.embedding_length", U32, cfg["hidden_size"]),
        gguf_kv(f"{arch}.feed_forward_length", U32, cfg["intermediate_size"]),
        gguf_kv(f"{arch}.attention.head_count", U32, cfg["num_attention_heads"]),
        gguf_kv(f"{arch}.attention.head_count_kv", U32, cfg["num_key_value_heads"]),
        gguf_kv(f"{arch}.rope.freq_base", F32, float(cfg["rope_theta"])),
        gguf_kv(f"{arch}.attention.layer_norm_rms_epsilon", F32, float(cfg["rms_norm_eps"])),
    ]
    if cfg.get("num_experts"):
        kvs += [gguf_kv(f"{arch}.expert_count", U32, cfg["num_experts"]),
                gguf_kv(f"{arch}.expert_used_count", U32, cfg["num_experts_per_tok"]),
                gguf_kv(f"{arch}.expert_feed_forward_length", U32, cfg["moe_intermediate_size"]),
                gguf_kv(f"{arch}.expert_weights_norm", BOOL, cfg.get("norm_topk_prob", False))]
        if cfg.get("shared_expert_intermediate_size"):
            kvs.append(gguf_kv(f"{arch}.expert_shared_feed_forward_length", U32,
                               cfg["shared_expert_intermediate_size"]))
    if cfg.get("head_dim"):
        kvs.append(gguf_kv(f"{arch}.attention.key_length", U32, cfg["head_dim"]))
        kvs.append(gguf_kv(f"{arch}.attention.value_length", U32, cfg["head_dim"]))
    if not os.path.exists(os.path.join(model_dir, "tokenizer.json")):
        return kvs
    tokens, types, merges = vocabulary(model_dir, cfg["vocab_size"])
    if tokens is None:  # a test model with fewer embedding rows than the tokenizer has ids
        return kvs
    eos = cfg.get("eos_token_id", 151643)
    eos = eos[0] if isinstance(eos, list) else eos
    kvs += [
        gguf_kv("tokenizer.ggml.model", STRING, "gpt2"),
        gguf_kv("tokenizer.ggml.pre", STRING, "qwen2"),
        gguf_kv("tokenizer.ggml.tokens", ARRAY, tokens, STRING),
        gguf_kv("tokenizer.ggml.token_type", ARRAY, types, I32),
        gguf_kv("tokenizer.ggml.merges", ARRAY, merges, STRING),
        gguf_kv("tokenizer.ggml.eos_token_id", U32, int(eos)),
        gguf_kv("tokenizer.ggml.bos_token_id", U32, int(cfg.get("bos_token_id") or 151643)),
        gguf_kv("tokenizer.ggml.padding_token_id", U32, int(cfg.get("bos_token_id") or 151643)),
        gguf_kv("tokenizer.ggml.add_bos_token", BOOL, False),
    ]
    template = chat_template(model_dir)
    if template:
        kvs.append(gguf_kv("tokenizer.chat_template", STRING, template))
    return kvs


def write_file(path: str, kvs: list, tensors: list) -> None:
    """tensors: [(gguf name, shape outermost first, ggml type name, bytes)]."""
    infos, blobs, offset = [], [], 0
    for gname, shape, kind, raw in tensors:
        dims = list(reversed(shape))
        infos.append(gguf_string(gname) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) +
                     struct.pack("<IQ", ggml_blocks.TYPES[kind][0], offset))
        pad = (-len(raw)) % ALIGN
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kvs)) + b"".join(kvs) + b"".join(infos)
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(head + b"\0" * ((-len(head)) % ALIGN))
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def split_paths(out_path: str, n: int) -> list:
    if n <= 1:
        return [out_path]
    stem = out_path[:-len(".gguf")] if out_path.endswith(".gguf") else out_path
    return [f"{stem}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]


def write_model(model_dir: str, out_path: str, args) -> list:
    """Writes the GGUF file(s); returns their paths (the first is what --model takes)."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    arch = ARCH.get(cfg["architectures"][0])
    if not arch:
        sys.exit(f"gguf_ref.py writes {', '.join(ARCH)}, not {cfg['architectures'][0]}")
    st = Safetensors(model_dir)
    kvs = metadata(cfg, model_dir, arch, cfg["num_hidden_layers"])
    tensors = []
    for gname, hname in tensor_plan(cfg, st):
        if isinstance(hname, list):  # stacked experts
            _, dtype, shape, _, _ = st.tensors[hname[0]]
            kind = choose_type(gname, dtype, shape[1], args)
            tensors.append((gname, [len(hname)] + shape, kind,
                            b"".join(encode(st.read(h), dtype, shape, kind) for h in hname)))
            continue
        _, dtype, shape, _, _ = st.tensors[hname]
        raw = st.read(hname)
        if FLOAT_ONLY.search(gname):
            # llama.cpp stores the shared-expert gate [1, hidden] as a vector
            shape = shape[1:] if shape[0] == 1 else shape
            tensors.append((gname, shape, "F32", encode(raw, dtype, shape, "F32")))
            continue
        if len(shape) == 1:
            # exact: bf16, f16 and f32 values all pass through float64 unchanged
            tensors.append((gname, shape, "F32", encode(raw, dtype, shape, "F32")))
            continue
        kind = choose_type(gname, dtype, shape[1], args)
        tensors.append((gname, shape, kind, encode(raw, dtype, shape, kind)))
    paths = split_paths(out_path, args.split)
    n = len(paths)
    per = -(-len(tensors) // n)
    for i, path in enumerate(paths):
        part = tensors[i * per:(i + 1) * per]
        split = [] if n == 1 else [gguf_kv("split.no", U16, i), gguf_kv("split.count", U16, n),
                                   gguf_kv("split.tensors.count", I32, len(tensors))]
        write_file(path, (kvs if i == 0 else []) + split, part)
    return paths


def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    types = sorted(ggml_blocks.TYPES)
    ap.add_argument("--type", choices=types, help="every matrix as this type")
    ap.add_argument("--embed-type", choices=types, help="token_embd as this type")
    ap.add_argument("--output-type", choices=types, help="the untied output head as this type")
    ap.add_argument("--mix", choices=["q4_k_m"], help="a per-tensor mix (see the docstring)")
    ap.add_argument("--split", type=int, default=1, help="write this many part files")
    return ap.parse_args(argv)


# --- reading ---------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, kind: int):
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            elem, n = self.take("<I"), self.take("<Q")
            return [self.value(elem) for _ in range(n)]
        return self.take(_SCALAR[kind])


def read_file(path: str):
    data = open(path, "rb").read()
    r = _Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    r.pos = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version}")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    align = meta.get("general.alignment", ALIGN)
    start = -(-r.pos // align) * align
    tensors = {}
    for name, dims, kind, off in infos:
        tname = TYPE_NAME[kind]
        _, elems, nbytes = ggml_blocks.TYPES[tname]
        size = int(np.prod(dims)) // elems * nbytes
        tensors[name] = (tname, list(reversed(dims)), data[start + off:start + off + size])
    return meta, tensors


def read(path: str):
    """(metadata of the first part, tensors of every part)."""
    meta, tensors = read_file(path)
    for i in range(1, int(meta.get("split.count", 1))):
        tensors.update(read_file(split_paths(path[:-len("-00001-of-00000.gguf")] + ".gguf",
                                             int(meta["split.count"]))[i])[1])
    return meta, tensors


def hf_tensors(path: str) -> dict:
    """{Hugging Face name: float64 array} of a GGUF model's tensors."""
    rename = dict(MODEL_NAMES)
    out = {}
    for gname, (tname, shape, raw) in read(path)[1].items():
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        values = ggml_blocks.dequantize(tname, raw, (rows, cols)).reshape(shape)
        m = re.match(r"blk\.(\d+)\.(.*)$", gname)
        if not m:
            out[rename[gname]] = values
            continue
        layer = f"model.layers.{m.group(1)}."
        if m.group(2) in dict(EXPERT_NAMES):
            for e in range(shape[0]):
                out[f"{layer}mlp.experts.{e}.{dict(EXPERT_NAMES)[m.group(2)]}"] = values[e]
            continue
        hname = layer + dict(LAYER_NAMES)[m.group(2)]
        gate = hname.endswith("shared_expert_gate.weight")  # [1, hidden], a vector in GGUF
        out[hname] = values.reshape(1, -1) if gate else values
    return out


def main(argv=None) -> int:
    args = options(argv)
    for p in write_model(args.model_dir, args.out, args):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
