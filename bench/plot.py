#!/usr/bin/python3
"""Charts of `qmpi bench --json` results: decode tokens/s against context length, one line per
KV cache dtype (and per label prefix, e.g. a build), and, when rows carry --batch > 1, tokens/s
against batch size. Reads JSON lines (bench/context_bench.sh, bench/cpu_bench.sh); rows that
are not bench results (STREAM reads, kernel rows) are skipped.

Usage: /usr/bin/python3 bench/plot.py RESULTS.jsonl [...] --out docs/img/decode-context.png
       [--title TEXT]
"""

import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip().startswith("{")]
    return [r for r in rows if "decode_tokens_per_s" in r]


def series_name(r: dict) -> str:
    build = r.get("label", "").split(" ")[0]
    kv = r.get("kv_dtype", "f32")
    return f"{build} {kv} KV".strip() if build and build != kv else f"{kv} KV"


def draw_panel(ax, series: dict, xlabel: str, ylabel: str, title: str) -> None:
    """One line per series of {x: tokens/s}, x on a log2 axis."""
    for name, pts in sorted(series.items()):
        xs = sorted(pts)
        ax.plot(xs, [pts[x] for x in xs], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default="qmpi decode, batch 1")
    args = ap.parse_args(argv)
    rows = load(args.results)
    if not rows:
        print("no qmpi bench rows in the input", file=sys.stderr)
        return 1
    by_context = defaultdict(dict)
    by_batch = defaultdict(dict)
    for r in rows:
        ctx = r.get("context", r.get("prompt_len", 0))
        # The best of repeated runs of one point (the host may be shared).
        s = by_context[series_name(r)]
        s[ctx] = max(s.get(ctx, 0.0), r["decode_tokens_per_s"])
        if r.get("batch", 1) > 1 and "batch_tokens_per_s" in r:
            b = by_batch[f"{series_name(r)}, context {ctx}"]
            b[1] = max(b.get(1, 0.0), r["decode_tokens_per_s"])
            b[r["batch"]] = max(b.get(r["batch"], 0.0), r["batch_tokens_per_s"])

    # A context panel whose every line is one point (a batch sweep at one context) says nothing.
    panels = []
    if not by_batch or any(len(pts) > 1 for pts in by_context.values()):
        panels.append((by_context, "context (tokens in the KV cache)", "decode tokens/s",
                       args.title))
    if by_batch:
        panels.append((by_batch, "sequences decoding together", "tokens/s (all sequences)",
                       "batched decode" if panels else args.title))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.2), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        draw_panel(ax, *panel)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out} ({len(rows)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
