"""Each rank reads exactly the bytes of its own slices (sharded loading), computed here
independently from the safetensors headers and the layout rules."""

import json
import math
import os
import re
import struct

import testlib as t

LOG = re.compile(r"\[rank (\d+) [^\]]*\] stage (\d+) tp (\d+): layers (\d+)-(\d+), .* \((\d+) bytes read\)")


def headers(model):
    index = os.path.join(model, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    tensors = {}
    for f in files:
        with open(os.path.join(model, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            h = json.loads(fh.read(n))
        h.pop("__metadata__", None)
        for name, info in h.items():
            size = {"F32": 4, "BF16": 2, "F16": 2}[info["dtype"]]
            tensors[name] = (info["shape"], size)
    return tensors


def even_part(n, parts, i):
    """Size of part i of n split as evenly as possible, the first parts one larger."""
    return n // parts + (1 if i < n % parts else 0)


def expected_bytes(tensors, cfg, tp, pp, tp_rank, stage):
    L, V = cfg["num_hidden_layers"], cfg["vocab_size"]
    per = [L // pp + (1 if s < L % pp else 0) for s in range(pp)]
    first = sum(per[:stage])
    layers = range(first, first + per[stage])
    vrows = even_part(V, tp, tp_rank)
    heads, group = cfg["num_attention_heads"], cfg["num_attention_heads"] // cfg["num_key_value_heads"]
    q_begin = sum(even_part(heads, tp, r) for r in range(tp_rank))
    q_end = q_begin + even_part(heads, tp, tp_rank)
    # The KV heads this rank's query heads read; a neighbour may read (and load) one of them too.
    share = {"q_proj": q_end - q_begin, "o_proj": q_end - q_begin,
             "k_proj": (q_end - 1) // group + 1 - q_begin // group}
    share["v_proj"] = share["k_proj"]
    total = 0
    for name, (shape, size) in tensors.items():
        numel = math.prod(shape)
        m = re.match(r"model\.layers\.(\d+)\.(.*)", name)
        if m:
            if int(m.group(1)) not in layers:
                continue
            rest = m.group(2)
            proj = rest.split(".")[1]
            if "layernorm" in rest:
                total += size * numel
            elif proj in share:  # heads x head_dim rows (or o_proj columns) of each
                head_dim = cfg["hidden_size"] // heads
                total += size * share[proj] * head_dim * (numel // shape[0] if proj != "o_proj"
                                                          else shape[0])
            else:  # gate/up rows, down columns
                total += size * numel // cfg["intermediate_size"] * even_part(
                    cfg["intermediate_size"], tp, tp_rank)
        elif name == "model.embed_tokens.weight":
            owners = (stage == 0) + (stage == pp - 1 and cfg["tie_word_embeddings"] and pp > 1)
            total += owners * size * vrows * shape[1]
        elif name == "lm_head.weight":
            total += (stage == pp - 1) * size * vrows * shape[1]
        elif name == "model.norm.weight":
            total += (stage == pp - 1) * size * numel
    return total


def body(c: t.Checks):
    for untied, shards in ((False, 3), (True, 1)):
        model = t.make_model(dtype="bf16", shards=shards, untied=untied)
        cfg = json.load(open(os.path.join(model, "config.json")))
        tensors = headers(model)
        file_bytes = sum(math.prod(s) * z for s, z in tensors.values())
        # 4x1 splits the 6 KV heads unevenly: ranks 0-1 and 2-3 each hold one KV head twice.
        for tp, pp in ((2, 3), (3, 2), (4, 1)):
            p = t.qmpi(["logits", "--model", model, "--ids", "1,2,3", "--out",
                        os.path.join(t.test_tmp("sharded"), "l.npy")], tp=tp, pp=pp)
            seen = {int(m.group(1)): m for m in LOG.finditer(p.stderr)}
            c.check(len(seen) == tp * pp, f"{tp}x{pp}: every rank logged its bytes ({len(seen)})")
            total = 0
            for rank, m in sorted(seen.items()):
                stage, tp_rank, got = int(m.group(2)), int(m.group(3)), int(m.group(6))
                want = expected_bytes(tensors, cfg, tp, pp, tp_rank, stage)
                total += got
                c.check(got == want, f"{'untied' if untied else 'tied'} {shards} shard(s) "
                        f"{tp}x{pp} rank {rank}: read {got} bytes, its share is {want}")
            # Replicated: norms on every TP rank, and the tied embedding on first and last stage.
            c.check(total < 1.2 * file_bytes * (1 + (not untied)),
                    f"{tp}x{pp}: all ranks together read {total} of {file_bytes} bytes")


t.main("sharded_loading", body)
