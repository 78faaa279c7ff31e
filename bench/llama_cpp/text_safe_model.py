#!/usr/bin/env python3
"""Copy a random-weight Qwen checkpoint so that its greedy output is always valid UTF-8 text.

Why: llama-server parses every streamed chunk as a chat message, and a random model's output
(lone byte tokens, half UTF-8 sequences, special tokens) makes that parse fail and the stream
end with an error after a few tokens. Zeroing the tied embedding rows of those tokens gives them
logit 0 where the others have random logits of either sign, so the argmax is a whole-text
token: both servers then run the same model to the full output length. The work per token is
unchanged (same shapes, same bytes read).

Usage: text_safe_model.py SRC_DIR DST_DIR   (SRC_DIR: one bf16 model.safetensors, tied embeddings)
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "reference"))
import safetensors_ref  # noqa: E402


def byte_decoder() -> dict:
    """The byte-level BPE alphabet: printable stand-in character -> byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(keep, chars)}


def unsafe_ids(tokenizer_json: str, rows: int) -> list:
    tok = json.load(open(tokenizer_json, encoding="utf-8"))
    dec = byte_decoder()
    bad = {t["id"] for t in tok.get("added_tokens", [])}
    for piece, i in tok["model"]["vocab"].items():
        try:
            bytes(dec[c] for c in piece).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            bad.add(i)
    known = set(tok["model"]["vocab"].values()) | bad
    bad |= {i for i in range(rows) if i not in known}  # padding rows past the vocabulary
    return sorted(i for i in bad if i < rows)


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    config = json.load(open(os.path.join(src, "config.json")))
    if not config.get("tie_word_embeddings"):
        sys.exit("text_safe_model.py: the model must tie its embeddings")
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    os.utime(os.path.join(dst, "config.json"))  # newer than the source: the bench scripts' check
    path = os.path.join(dst, "model.safetensors")
    header, data_start, _ = safetensors_ref.read_header(path)
    entry = header["model.embed_tokens.weight"]
    if entry["dtype"] != "BF16":
        sys.exit("text_safe_model.py: expects bf16 embeddings")
    rows, hidden = entry["shape"]
    ids = unsafe_ids(os.path.join(dst, "tokenizer.json"), rows)
    with open(path, "r+b") as f:
        for i in ids:
            f.seek(data_start + entry["data_offsets"][0] + i * hidden * 2)
            f.write(bytes(hidden * 2))
    print(f"{dst}: {len(ids)} of {rows} embedding rows zeroed (not whole UTF-8 text)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
