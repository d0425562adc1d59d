#!/usr/bin/env python3
"""cuda_flips.py STORE [DRIFTBENCH] - the flip-rate table of bench/cuda.sh's store.

After `bench/cuda.sh BUNDLE suites|all` on the GPU machine and
`driftbench score` here, prints one markdown row per (pair, model): the paper's
hardware and precision axes measured on real hardware (CPU f32 vs GPU f32, CPU
bf16 vs GPU bf16, GPU bf16 vs GPU fp8) and batch invariance on the GPU (batch 1
vs 64 with batch_invariant=1 and =0). Each cell is flips/n and the flip rate's
Wilson 95% upper bound, from `driftbench compare --format json`; "text" is the
share of answers whose text differs at all (any workload), read from the store.
"""
import json
import sqlite3
import subprocess
import sys

PAIRS = [("CPU f32 vs GPU f32", "cpu-f32@{m}", "cuda-f32@{m}"),
         ("CPU bf16 vs GPU bf16", "cpu-bf16@{m}", "cuda-bf16@{m}"),
         ("GPU bf16 vs GPU fp8", "cuda-bf16@{m}", "cuda-fp8@{m}"),
         ("GPU bf16, invariant, b1 vs b64", "cuda-bf16-bi1-b1@{m}", "cuda-bf16-bi1-b64@{m}"),
         ("GPU bf16, variant, b1 vs b64", "cuda-bf16-bi0-b1@{m}", "cuda-bf16-bi0-b64@{m}"),
         ("GPU bf16 cuBLAS, invariant, b1 vs b64", "cuda-bf16-vendor-bi1-b1@{m}", "cuda-bf16-vendor-bi1-b64@{m}"),
         ("GPU bf16 cuBLAS, variant, b1 vs b64", "cuda-bf16-vendor-bi0-b1@{m}", "cuda-bf16-vendor-bi0-b64@{m}")]
WORKLOADS = ["math", "code", "safety", "chat", "long_context"]


def text_diff(db, a, b):
    q = """select count(*), sum(ra.text != rb.text) from responses ra
           join runs xa on xa.id = ra.run_id join responses rb on rb.prompt_rowid = ra.prompt_rowid
           join runs xb on xb.id = rb.run_id
           where xa.label = ? and xb.label = ? and ra.failed = 0 and rb.failed = 0"""
    n, d = db.execute(q, (a, b)).fetchone()
    return n or 0, d or 0


def main():
    store = sys.argv[1]
    exe = sys.argv[2] if len(sys.argv) > 2 else "build/driftbench"
    db = sqlite3.connect(store)
    labels = {r[0] for r in db.execute("select label from runs")}
    models = sorted({l.split("@", 1)[1] for l in labels if "@" in l})
    print("| pair | model | " + " | ".join(WORKLOADS) + " | text differs |")
    print("|---|---|" + "---:|" * (len(WORKLOADS) + 1))
    for name, a, b in PAIRS:
        for m in models:
            la, lb = a.format(m=m), b.format(m=m)
            if la not in labels or lb not in labels:
                continue
            out = subprocess.run([exe, "compare", "--db", store, "--baseline", la, "--target", lb, "--format", "json"],
                                 capture_output=True, text=True)
            if out.returncode not in (0, 1):
                sys.exit(f"cuda_flips: compare {la} {lb} failed: {out.stderr.strip()}")
            rep = json.loads(out.stdout)
            cells = {w["workload"]: w for w in rep["workloads"]}
            row = []
            for w in WORKLOADS:
                c = cells.get(w)
                row.append("-" if not c or not c["n"] else
                           f'{c["flips"]}/{c["n"]} (<= {100 * c["ci95"][1]:.1f}%)')
            n, d = text_diff(db, la, lb)
            row.append(f"{d}/{n}")
            print(f"| {name} | {m} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
