#!/usr/bin/env python3
"""`qmpi tokenize` against Hugging Face's own tokenizer (the npm package `tokenizers`, driven by
tests/reference/hf_tokenize.js) on the corpus of tests/fixtures/tokenizer_corpus.py:
  - encode: ids equal line by line (add_special_tokens=false on the HF side);
  - encode --no-special: equal to HF with the special tokens made unmatchable (ids kept);
  - decode(encode(x)) == NFC(x) on every line, and our decode equals HF's decode;
  - decode of id lists that cut characters: same U+FFFD replacement as HF;
  - --chat and bad lines: a bad line gets {"error"} and the lines after it still run.
Prints the encode throughput (MB/s of text, tokenizer load time excluded).
"""

import json
import os
import random
import resource
import shutil
import subprocess
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib  # noqa: E402
from testlib import TestFailure  # noqa: E402

sys.path.insert(0, os.path.join(testlib.SOURCE_DIR, "tests", "fixtures"))
import tokenizer_corpus  # noqa: E402

TOKENIZER = os.path.join(testlib.SOURCE_DIR, ".cache", "qwen-tokenizer", "tokenizer.json")
HF_MODULE = os.path.join(testlib.SOURCE_DIR, ".cache", "npm", "node_modules", "tokenizers")
HF_DRIVER = os.path.join(testlib.SOURCE_DIR, "tests", "reference", "hf_tokenize.js")
SETUP_HINT = "run scripts/setup.sh to fetch the Qwen tokenizer and Hugging Face's tokenizers"


def pipe(cmd, lines, timeout=120, allow_fail=False):
    """Runs cmd with JSONL `lines` (objects, or raw strings sent as they are) on stdin; returns
    (parsed output lines, CPU seconds it used, exit code). CPU time rather than wall time, so the
    throughput it feeds stays meaningful on a busy machine."""
    data = "".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n"
                   for x in lines).encode("utf-8")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode != 0 and not allow_fail:
        print(proc.stderr.decode("utf-8", "replace")[-4000:])
        raise TestFailure(f"exit {proc.returncode}: {' '.join(cmd)}")
    # Split on "\n" only: decoded text may hold U+2028 or U+0085, which splitlines() breaks at.
    out = [json.loads(l) for l in proc.stdout.decode("utf-8").split("\n")[:-1]]
    if len(out) != len(lines):
        raise TestFailure(f"{' '.join(cmd[:3])} wrote {len(out)} lines for {len(lines)} inputs")
    return out, took, proc.returncode


def hf(lines, tokenizer=TOKENIZER, decode=False):
    cmd = ["node", HF_DRIVER, tokenizer] + (["--decode"] if decode else [])
    return pipe(cmd, lines)[0]


def qmpi(lines, *flags, allow_fail=False):
    return pipe([testlib.qmpi_binary(), "tokenize", "--tokenizer", TOKENIZER, *flags], lines,
                allow_fail=allow_fail)


def show(text, limit=160):
    r = repr(text)
    return r if len(r) <= limit else r[:limit] + f"... ({len(text)} chars)"


def compare_ids(checks, label, texts, ours, ref):
    """One check for the whole corpus; prints the first mismatch with its context."""
    bad = [i for i, (a, b) in enumerate(zip(ours, ref)) if a != b]
    if bad:
        i = bad[0]
        a, b = ours[i].get("ids"), ref[i]["ids"]
        if a is None:
            print(f"  line {i + 1} {show(texts[i])}: qmpi answered {ours[i]}")
        else:
            k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
            print(f"  first mismatch: line {i + 1}, token {k}: {show(texts[i])}\n"
                  f"    qmpi ids[{max(0, k - 4)}:{k + 5}] = {a[max(0, k - 4):k + 5]}\n"
                  f"    HF   ids[{max(0, k - 4)}:{k + 5}] = {b[max(0, k - 4):k + 5]}")
    checks.check(not bad, f"{label}: {len(texts) - len(bad)} of {len(texts)} lines equal to HF")


def check_setup():
    for path, what in [(TOKENIZER, "the Qwen tokenizer.json"), (HF_MODULE, "HF tokenizers")]:
        if not os.path.exists(path):
            raise TestFailure(f"{what} is missing at {path}: {SETUP_HINT}")
    if not shutil.which("node"):
        raise TestFailure(f"node is not on PATH: {SETUP_HINT}")


def unmatchable_specials(tmp):
    """tokenizer.json whose special tokens can never match (ids unchanged): HF's encoding with it
    is what `--no-special` must produce (HF's split_special_tokens, which node does not expose)."""
    tok = json.load(open(TOKENIZER, encoding="utf-8"))
    for t in tok["added_tokens"]:
        if t["special"]:
            t["content"] = "\ue000\ue001" + t["content"]
    path = os.path.join(tmp, "tokenizer_no_special.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    return path


def cut_character_id_lists(rng):
    """Id lists of single bytes that start, cut and break multi-byte characters."""
    tok = json.load(open(TOKENIZER, encoding="utf-8"))["model"]["vocab"]
    byte_id = {}
    for b in range(256):
        spelled = byte_char(b)
        byte_id[b] = tok[spelled]
    lead = [0xC2, 0xDF, 0xE0, 0xE4, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xC0, 0xFF]
    cont = [0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBD, 0xBF]
    lists = []
    for _ in range(200):
        ids = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.35:
                ids.append(byte_id[rng.choice(lead)])
            elif r < 0.75:
                ids.append(byte_id[rng.choice(cont)])
            else:
                ids.append(rng.choice([9707, 1879, 220, 108386, 151645, 151657]))
        lists.append({"ids": ids})
    return lists


def byte_char(b):
    """GPT-2's byte -> character map (facts sheet section 3)."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in printable:
        return chr(b)
    return chr(0x100 + [x for x in range(256) if x not in printable].index(b))


def report_throughput(texts, took):
    """Encode speed of `qmpi tokenize` in MB of text per CPU second, from the difference between
    one pass over the corpus (`took`) and 20 passes in one run, so the tokenizer's load time
    cancels out (the BPE cache is warm after the first pass). A measurement, not a check."""
    twenty = qmpi([{"text": t} for t in texts] * 20)[1]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"  throughput: {19 * mb / max(twenty - took, 1e-6):.2f} MB/s of text ({mb:.3f} MB "
          f"per pass; 1 pass {took:.2f} s, 20 passes {twenty:.2f} s of CPU, load included)")


def body(checks):
    check_setup()
    tmp = testlib.test_tmp("tokenizer_vs_hf")
    texts = tokenizer_corpus.write_jsonl(os.path.join(tmp, "corpus.jsonl"))
    requests = [{"text": t} for t in texts]
    checks.check(len(texts) >= 200 and "" in texts and any(len(t) == 50_000 for t in texts),
                 f"corpus: {len(texts)} lines, an empty one and a 50,000-character one")

    ref = hf(requests)
    ours, took, _ = qmpi(requests)
    compare_ids(checks, "encode", texts, ours, ref)
    report_throughput(texts, took)

    no_special_ref = hf(requests, tokenizer=unmatchable_specials(tmp))
    no_special, _, _ = qmpi(requests, "--no-special")
    compare_ids(checks, "encode --no-special", texts, no_special, no_special_ref)

    id_lists = [{"ids": r.get("ids", [])} for r in ref]
    decoded, _, _ = qmpi(id_lists, "--decode")
    hf_decoded = hf(id_lists, decode=True)
    bad_nfc = [i for i, t in enumerate(texts)
               if decoded[i].get("text") != unicodedata.normalize("NFC", t)]
    for i in bad_nfc[:1]:
        print(f"  line {i + 1}: decode gave {show(decoded[i])} for {show(texts[i])}")
    checks.check(not bad_nfc, f"decode(encode(x)) == NFC(x): {len(texts) - len(bad_nfc)} of "
                 f"{len(texts)} lines")
    checks.check(decoded == hf_decoded, "decode equals HF's decode on every line")

    cut = cut_character_id_lists(random.Random(7))
    ours_cut, _, _ = qmpi(cut, "--decode")
    ref_cut = hf(cut, decode=True)
    same = sum(a == b for a, b in zip(ours_cut, ref_cut))
    checks.check(same == len(cut), f"decode of cut characters: {same} of {len(cut)} id lists "
                 "give HF's text (U+FFFD per maximal subpart)")

    # The model's own chat template (Qwen3's, from tokenizer_config.json beside tokenizer.json);
    # chat_template_vs_jinja2.py compares the rendering itself with Jinja2.
    chat_lines = [{"messages": [{"role": "user", "content": "Hello"}]},
                  {"messages": ["not a message"]},
                  {"messages": [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "2+2?"}],
                   "add_generation_prompt": False}]
    chat, _, rc = qmpi(chat_lines, "--chat", allow_fail=True)
    prompts = ["<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
               "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"]
    chat_ref = hf([{"text": p} for p in prompts])
    checks.check([chat[0].get("text"), chat[2].get("text")] == prompts and
                 chat[0].get("ids") == chat_ref[0]["ids"] and chat[2].get("ids") == chat_ref[1]["ids"],
                 "--chat renders the model's template; ids equal HF's")
    checks.check("QM501" in chat[1].get("error", "") and rc == 2,
                 f"--chat: a malformed message is an error line ({chat[1]}), exit code {rc}")

    mixed, _, rc = pipe([testlib.qmpi_binary(), "tokenize", "--tokenizer", TOKENIZER],
                        [{"text": "a"}, {"txt": "b"}, "{not json", {"text": 5},
                         {"text": "Hello world"}], allow_fail=True)
    checks.check(mixed[0] == {"ids": [64]} and all("error" in m for m in mixed[1:4])
                 and mixed[4] == {"ids": [9707, 1879]} and rc == 2,
                 f"bad lines answer {{\"error\"}} and later lines go on: {mixed}")


if __name__ == "__main__":
    testlib.main("tokenizer_vs_hf", body)
