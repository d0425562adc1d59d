#!/usr/bin/env python3
"""summarize.py - the findings tables of the real-stack study (issue 24), from
the files tools/study/tables.sh writes. Every figure is computed here from
the flip table and the paired comparisons; nothing is typed in.

  summarize.py --pair-csv BASELINE TARGET < compare.json   (one pairs.csv row per workload)
  summarize.py --table flip_rates.csv --pairs pairs.csv [--db study.db] > summary.md

Intervals: Wilson 95% on pooled counts (which treats every paired answer as
independent; the same prompts recur across configurations, so it is too
narrow when pooled over configurations), and beside it a bootstrap 95%
interval that resamples configurations (2,000 draws, seed 1), which carries
the spread between stacks. With --db, the pair table also counts answers
whose texts differ at all (read-only).
"""
import argparse
import csv
import json
import math
import random
import sqlite3
import sys
from collections import defaultdict

WL = ["math", "code", "safety", "chat", "long_context"]
# the paper's mean flip rate per workload over its configurations, percent
# (PAPER.md; chat: its semantic drift rate)
PAPER = {"math": 16.74, "chat": 12.4, "code": 0.09, "safety": 7.97, "long_context": 1.55}


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def boot(rows, reps=2000, seed=1):
    """95% interval of sum(flips)/sum(n) resampling the rows (configurations)."""
    if len(rows) < 2:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    vals = []
    for _ in range(reps):
        k = n = 0
        for _ in rows:
            f, m = rows[rng.randrange(len(rows))]
            k += f
            n += m
        vals.append(k / n if n else 0.0)
    vals.sort()
    return (vals[int(0.025 * reps)], vals[int(0.975 * reps) - 1])


def pct(x):
    return "-" if x != x else f"{100 * x:.2f}"


def cell(k, n):
    if n == 0:
        return "-"
    lo, hi = wilson(k, n)
    return f"{pct(k / n)} [{pct(lo)}, {pct(hi)}]"


def pair_csv(base, targ):
    c = json.load(sys.stdin)
    w = csv.writer(sys.stdout, lineterminator="\n")
    for x in c.get("workloads", []):
        lo, hi = (x.get("ci95") or [None, None])[:2]
        w.writerow([base, targ, x["workload"], x["n"], x["flips"], x["flip_rate"], lo, hi,
                    x.get("correct_to_incorrect"), x.get("incorrect_to_correct")])


def stack_of(eid):
    return eid.split("@", 1)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair-csv", nargs=2, metavar=("BASELINE", "TARGET"))
    ap.add_argument("--table")
    ap.add_argument("--pairs")
    ap.add_argument("--db")
    a = ap.parse_args()
    if a.pair_csv:
        pair_csv(*a.pair_csv)
        return
    if not a.table:
        ap.error("--table is required")
    rows = list(csv.DictReader(open(a.table, newline="")))
    for r in rows:
        r["f"], r["n"] = int(r["num_flips"]), int(r["num_comparisons"])
    out = []
    p = out.append
    models = sorted({r["model"] for r in rows})
    p(f"{len({r['experiment_id'] for r in rows})} configurations of {len(models)} models "
      f"({', '.join(models)}), {sum(r['n'] for r in rows)} paired answers against each model's `ref`.\n")

    # 1. workload ordering
    p("### Flip rate per workload, pooled over every configuration (percent)\n")
    p("| workload | flips / pairs | rate [Wilson 95%] | bootstrap over configurations | paper |")
    p("|---|---:|---:|---:|---:|")
    for w in WL:
        rs = [(r["f"], r["n"]) for r in rows if r["workload"] == w]
        k, n = sum(f for f, _ in rs), sum(m for _, m in rs)
        lo, hi = boot(rs)
        p(f"| {w} | {k} / {n} | {cell(k, n)} | [{pct(lo)}, {pct(hi)}] | {PAPER[w]} |")
    p("")

    # 2. by dimension
    for dim in ("hardware", "precision", "framework", "model"):
        p(f"### Flip rate by {dim}, all workloads pooled (percent)\n")
        p(f"| {dim} | configurations | flips / pairs | rate [Wilson 95%] | bootstrap over configurations |")
        p("|---|---:|---:|---:|---:|")
        for lvl in sorted({r[dim] for r in rows}):
            sel = [r for r in rows if r[dim] == lvl]
            per = defaultdict(lambda: [0, 0])
            for r in sel:
                per[r["experiment_id"]][0] += r["f"]
                per[r["experiment_id"]][1] += r["n"]
            rs = list(per.values())
            k, n = sum(f for f, _ in rs), sum(m for _, m in rs)
            lo, hi = boot(rs)
            p(f"| {lvl} | {len(rs)} | {k} / {n} | {cell(k, n)} | [{pct(lo)}, {pct(hi)}] |")
        p("")

    # 3. the headline: each stack, the models pooled
    p("### Each stack against `ref`, the models pooled: flip rate per workload (percent, flips in parentheses)\n")
    stacks = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in rows:
        s = stacks[stack_of(r["experiment_id"])][r["workload"]]
        s[0] += r["f"]
        s[1] += r["n"]
    p("| stack | " + " | ".join(WL) + " | all |")
    p("|---|" + "---:|" * (len(WL) + 1))
    for s in sorted(stacks):
        tk = sum(v[0] for v in stacks[s].values())
        tn = sum(v[1] for v in stacks[s].values())
        cells = []
        for w in WL:
            k, n = stacks[s][w]
            cells.append("-" if n == 0 else f"{pct(k / n)} ({k})")
        p(f"| {s} | " + " | ".join(cells) + f" | {pct(tk / tn)} ({tk}/{tn}) |")
    p("")

    # 4. the paired questions
    if a.pairs:
        prs = list(csv.DictReader(open(a.pairs, newline="")))
        con = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True) if a.db else None
        ids = dict(con.execute("select label, id from runs")) if con else {}

        def differ(b, t):
            if b not in ids or t not in ids:
                return None
            return con.execute(
                "select count(*), sum(x.text <> y.text) from responses x join responses y on "
                "x.prompt_rowid = y.prompt_rowid and x.replicate = y.replicate "
                "where x.run_id = ? and y.run_id = ? and x.failed = 0 and y.failed = 0",
                (ids[b], ids[t])).fetchone()

        groups = defaultdict(list)
        for r in prs:
            key = (stack_of(r["baseline"]), stack_of(r["target"]))
            groups[key].append(r)
        p("### The paired questions: one stack against another, the models pooled\n")
        p("| baseline -> target | flips / pairs | rate [Wilson 95%] | math | code | safety | chat | long | texts differ |")
        p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (b, t), rs in groups.items():
            k = sum(int(r["flips"]) for r in rs)
            n = sum(int(r["n"]) for r in rs)
            per = {}
            for w in WL:
                per[w] = sum(int(r["flips"]) for r in rs if r["workload"] == w)
            td = "-"
            if con:
                dd = [differ(x, y) for x, y in {(r["baseline"], r["target"]) for r in rs}]
                dd = [d for d in dd if d]
                if dd:
                    td = f"{sum(d[1] or 0 for d in dd)} / {sum(d[0] for d in dd)}"
            p(f"| {b} -> {t} | {k} / {n} | {cell(k, n)} | " + " | ".join(str(per[w]) for w in WL) + f" | {td} |")
        p("")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
