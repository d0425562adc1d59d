#!/usr/bin/python3
"""Extracts the stochastic leg's per-prompt replicate verdicts from a lab's
store into the CSV that test_stoch_estimand.c reads:
prompt,a1_pass,a1_fail,b1_pass,b1_fail,a2_pass,a2_fail,b2_pass,b2_fail,det_flip

    /usr/bin/python3 tests/data/analysis/lab_stoch.py LAB.db MODEL > tests/data/analysis/lab_stoch.csv

A1/B1 = stochastic/MODEL/f32 and /int4 (seed 42), A2/B2 = .../f32-null and
.../int4-null (the null seed); det_flip = the verdicts of MODEL/cpu-best/f32/seq
and MODEL/cpu-best/int4/seq differ (-1 when either is missing). Math prompts
with a verdict in all four sets. lab_stoch.csv was made from the lab the
issue's audit read (`make lab` of 2026-12-06, llama-fragile-7m, 100 prompts,
5 replicates at temperature 0.7)."""
import sqlite3
import sys


def main():
    db, model = sys.argv[1], sys.argv[2]
    con = sqlite3.connect(db)
    sets = [f"stochastic/{model}/f32", f"stochastic/{model}/int4", f"stochastic/{model}/f32-null",
            f"stochastic/{model}/int4-null"]
    det = [f"{model}/cpu-best/f32/seq", f"{model}/cpu-best/int4/seq"]
    q = """SELECT s.prompt_rowid, sc.label FROM runs r JOIN responses s ON s.run_id = r.id
           JOIN scores sc ON sc.response_id = s.id JOIN prompts p ON p.id = s.prompt_rowid
           WHERE r.label = ? AND p.workload = 'math' AND s.failed = 0 AND sc.label IN (0, 1)"""
    counts = []
    for label in sets:
        c = {}
        for prompt, lab in con.execute(q, (label,)):
            c.setdefault(prompt, [0, 0])[0 if lab == 1 else 1] += 1
        counts.append(c)
    dv = [dict(con.execute(q, (label,)).fetchall()) for label in det]
    print("prompt,a1_pass,a1_fail,b1_pass,b1_fail,a2_pass,a2_fail,b2_pass,b2_fail,det_flip")
    for prompt in sorted(counts[0]):
        if not all(prompt in c for c in counts):
            continue
        d = int(dv[0][prompt] != dv[1][prompt]) if prompt in dv[0] and prompt in dv[1] else -1
        cells = ",".join(f"{c[prompt][0]},{c[prompt][1]}" for c in counts)
        print(f"{prompt},{cells},{d}")


if __name__ == "__main__":
    main()
