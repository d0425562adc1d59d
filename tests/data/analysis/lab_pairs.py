#!/usr/bin/python3
"""Extracts the paired verdicts of one workload from a lab's store into
the CSV that test_cluster_boot.c reads (prompt,config,base_ok,cfg_ok).

    /usr/bin/python3 tests/data/analysis/lab_pairs.py LAB.db math > tests/data/analysis/lab_math_pairs.csv

The baseline of a configuration "MODEL/..." is the run "ref@MODEL" (the
lab's design before issue 36); a pair is a prompt with a pass/fail verdict
(scores.label 1/0, replicate 0) in both runs. config is the configuration's
run id, prompt the prompt's rowid. lab_math_pairs.csv was made from the lab
the issue's audit read (`make lab` of 2026-12-06, 24 configurations, 150
math prompts, 76 flips in 3,600 pairs: "math 2.11% [0.74%, 5.87%]")."""
import sqlite3
import sys


def main():
    db, workload = sys.argv[1], sys.argv[2]
    con = sqlite3.connect(db)
    q = """SELECT r.id, r.label, s.prompt_rowid, sc.label
           FROM runs r JOIN responses s ON s.run_id = r.id JOIN scores sc ON sc.response_id = s.id
           JOIN prompts p ON p.id = s.prompt_rowid
           WHERE p.workload = ? AND s.replicate = 0 AND s.failed = 0 AND sc.label IN (0, 1)"""
    verdict = {}
    runs = {}
    for rid, label, prompt, lab in con.execute(q, (workload,)):
        verdict[(rid, prompt)] = lab
        runs[rid] = label
    ref = {label.split("@", 1)[1]: rid for rid, label in runs.items() if label.startswith("ref@")}
    print("prompt,config,base_ok,cfg_ok")
    for rid, label in sorted(runs.items()):
        if label.startswith("ref@") or label.startswith("stochastic/"):
            continue
        base = ref[label.split("/", 1)[0]]
        for (r, prompt), lab in sorted(verdict.items()):
            if r == rid and (base, prompt) in verdict:
                print(f"{prompt},{rid},{verdict[(base, prompt)]},{lab}")


if __name__ == "__main__":
    main()
