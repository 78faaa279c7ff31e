#!/usr/bin/python3
"""The tokenizer a GGUF file embeds (tokenizer.ggml.*) against tokenizer.json.

tests/reference/gguf_ref.py writes a tiny model as GGUF with the Qwen tokenizer embedded, into a
folder without tokenizer.json. `qmpi tokenize --model FILE.gguf` must then give the ids
`qmpi tokenize --tokenizer tokenizer.json` gives on every line of the tokenizer test corpus
(tests/fixtures/tokenizer_corpus.py, NFC-changing lines included: the GGUF has no normalizer and
qmpi applies Qwen's NFC for pre "qwen2", see src/text/gguf_tokenizer.h), with and without special
tokens, decode the same, and render the same chat prompt from the embedded template. With a
tokenizer.json beside the file, that one is used and the log says so.
"""

import json
import os
import shutil
import subprocess
import sys

import testlib  # first: it puts tests/reference on the path
import gguf_ref

sys.path.insert(0, os.path.join(testlib.SOURCE_DIR, "tests", "fixtures"))
import tokenizer_corpus  # noqa: E402

TOKENIZER = os.path.join(testlib.SOURCE_DIR, ".cache", "qwen-tokenizer", "tokenizer.json")


def tokenize(source_flags, lines, *flags):
    """(output objects, stderr) of `qmpi tokenize` over JSONL `lines`."""
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    proc = subprocess.run([testlib.qmpi_binary(), "tokenize", *source_flags, *flags], input=data,
                          capture_output=True, timeout=300)
    if proc.returncode != 0:
        raise testlib.TestFailure(f"qmpi tokenize exit {proc.returncode}: "
                                  f"{proc.stderr.decode(errors='replace')[-2000:]}")
    out = [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n") if line.strip()]
    return out, proc.stderr.decode(errors="replace")


def body(c: testlib.Checks) -> None:
    tmp = testlib.test_tmp("gguf_tokenizer")
    base = testlib.make_model("tiny", seed=3, dtype="bf16")
    alone = os.path.join(tmp, "alone")
    shutil.rmtree(alone, ignore_errors=True)
    os.makedirs(alone)
    model = os.path.join(alone, "tiny.gguf")
    gguf_ref.write_model(base, model, gguf_ref.options([base, model]))
    texts = tokenizer_corpus.write_jsonl(os.path.join(tmp, "corpus.jsonl"))
    requests = [{"text": t} for t in texts]
    json_flags, gguf_flags = ["--tokenizer", TOKENIZER], ["--model", model]

    for label, flags in (("encode", []), ("encode --no-special", ["--no-special"])):
        want, _ = tokenize(json_flags, requests, *flags)
        got, log = tokenize(gguf_flags, requests, *flags)
        bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        for i in bad[:2]:
            print(f"  line {i + 1}: {got[i]} != {want[i]}")
        c.check(len(got) == len(want) == len(texts) and not bad,
                f"{label}: embedded tokenizer == tokenizer.json on {len(texts) - len(bad)} of "
                f"{len(texts)} corpus lines")
    c.check("embeds" in log, "the log says the embedded tokenizer is used")

    id_lists = [{"ids": r["ids"]} for r in want]
    c.check(tokenize(gguf_flags, id_lists, "--decode")[0] ==
            tokenize(json_flags, id_lists, "--decode")[0], "decode: the same text on every line")

    chat = [{"messages": [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": "Hello, 世界!"}]}]
    want_chat, _ = tokenize(["--model", base], chat, "--chat")
    got_chat, _ = tokenize(gguf_flags, chat, "--chat")
    c.check(got_chat == want_chat and "<|im_start|>" in got_chat[0].get("text", ""),
            "--chat: the embedded template renders and encodes as tokenizer_config.json's")

    shutil.copy(TOKENIZER, os.path.join(alone, "tokenizer.json"))
    _, log = tokenize(gguf_flags, requests[:1])
    c.check("wins over the tokenizer the file embeds" in log,
            "a tokenizer.json beside the file is used, and the log says so")


if __name__ == "__main__":
    testlib.main("gguf_tokenizer", body)
