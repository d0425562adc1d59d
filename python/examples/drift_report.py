#!/usr/bin/env python3
"""A notebook-style look at two runs of a DriftBench store (docs/python.md).

    python3 python/examples/drift_report.py runs.db baseline target

Cells (each could be a notebook cell):
  1. the store's runs
  2. the flip table read from the answers and scores (pandas)
  3. the flipped prompts with both answers side by side
  4. compare and the gate through libdriftbench (when it is found), the
     numbers `driftbench compare` prints
"""
import sys

import pandas as pd

import driftbench as db

store, base, targ = sys.argv[1:4]
pd.set_option("display.width", 160)

# 1. the runs
st = db.open_store(store)
print(f"store schema v{st.schema_version}")
print(st.runs()[["label", "target", "started_at"]].to_string(index=False))

# 2. the flip table
ft = st.flip_table(base, targ)
print("\nflip table")
print(ft[["workload", "n", "flips", "flip_rate", "pass_to_fail", "fail_to_pass", "errors"]].to_string(index=False))

# 3. the flipped prompts, both answers
pairs = st.pairs(base, targ)
answers = st.answers()[["response_id", "text"]].set_index("response_id").text
flips = pairs[pairs.flipped].assign(baseline_answer=lambda d: d.baseline_response.map(answers).str.replace("\n", " ").str[:40],
                                    target_answer=lambda d: d.target_response.map(answers).str.replace("\n", " ").str[:40])
print(f"\n{len(flips)} flipped prompts")
print(flips[["workload", "prompt_id", "direction", "baseline_answer", "target_answer"]].head(10).to_string(index=False))

# 4. the C library's compare and gate (skipped when libdriftbench is not found)
try:
    lib = db.Library()
except OSError as e:
    print(f"\n(no libdriftbench: {e})")
else:
    c = db.read_compare(lib.compare(store, base, targ))
    print(f"\ncompare: {c.verdict} (exit {c.exit_code})")
    print(c.workloads[["workload", "n", "flips", "flip_rate", "budget", "verdict"]].to_string(index=False))
    m = c.workloads.set_index("workload").loc["math"] if "math" in set(c.workloads.workload) else None
    if m is not None:
        more = lib.gate(m.flips, m.n * 4, 0, 0.02)
        print(f"math's gate at 4x the pairs with the same flip count: {more['verdict']} "
              f"(95% CI {more['ci95'][0]:.4f}..{more['ci95'][1]:.4f})")
