#!/usr/bin/python3
"""spec_decode_draft.py's small draft (2 layers, vocabulary padded to 152064 rows, k = 3) under
mpirun: the same 16 requests (greedy and seeded, n = 2, top logprobs, stop strings) at TP 2,
PP 3 (micro-batches in flight), TP 4 (the tiny model's 6 KV heads split unevenly) and --dp 2
give the plain 1x1 run's results (tokens, text, finish reasons, usage and top-logprob tokens
exactly, logprobs within 1e-3), within each max_tokens, and guesses are made and checked. Split
from spec_decode_draft.py so that only these runs hold the MPI lock.
"""

import testlib as t
from spec_decode_draft import check_small_draft, make_small_draft

LAYOUTS = [("tp2", ["--tp", "2"], 2), ("pp3", ["--pp", "3"], 3), ("tp4", ["--tp", "4"], 4),
           ("dp2", ["--dp", "2"], 2)]


def body(c: t.Checks) -> None:
    target = t.make_model()
    check_small_draft(c, target, make_small_draft(target), "spec_draft_layouts", LAYOUTS)


if __name__ == "__main__":
    t.main("spec_decode_draft_layouts", body)
