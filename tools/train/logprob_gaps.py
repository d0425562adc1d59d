"""logprob_gaps.py - the margins of greedy answers: the top-1 minus top-2 logprob at each generated token,
read from a driftbench store whose run was made with `driftbench run --logprobs 2` (or more).

A greedy answer can only change under other numerics where its two best tokens are close: the
distribution of this gap along the answers (per token, and the smallest gap of each answer) says how
fragile a model's answers are, before any second stack is run. The store keeps each answer's logprobs
as one zstd frame of JSON ([{"token", "logprob", "top": [{"token", "logprob"}, ...]}, ...]); they are
unpacked with the zstd command-line tool.

  python3 logprob_gaps.py DB LABEL [LABEL...] [--json OUT.json]
"""
import argparse
import json
import sqlite3
import subprocess

THRESH = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)


def unpack(blob):
    r = subprocess.run(["zstd", "-dc"], input=bytes(blob), capture_output=True, check=True)
    return json.loads(r.stdout)


def share(xs, t):
    return round(sum(1 for x in xs if x < t) / len(xs), 4) if xs else None


def stats(per_answer):
    toks = sorted(g for a in per_answer for g in a)
    mins = sorted(min(a) for a in per_answer if a)
    return {"answers": len(per_answer), "tokens": len(toks),
            "token_gap_median": round(toks[len(toks) // 2], 3) if toks else None,
            "token_gap_lt": {str(t): share(toks, t) for t in THRESH},
            "answer_min_gap_median": round(mins[len(mins) // 2], 3) if mins else None,
            "answer_min_gap_lt": {str(t): share(mins, t) for t in THRESH}}


def label_gaps(db, label):
    """{workload: stats} of one run"""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT p.workload, r.logprobs FROM responses r JOIN runs u ON u.id = r.run_id "
                       "JOIN prompts p ON p.id = r.prompt_rowid WHERE u.label = ? AND r.failed = 0 AND r.logprobs IS NOT NULL "
                       "ORDER BY r.prompt_rowid", (label,)).fetchall()
    by = {}
    for wl, blob in rows:
        gaps = []
        for t in unpack(blob):
            top = t.get("top") or []
            if len(top) >= 2:
                gaps.append(top[0]["logprob"] - top[1]["logprob"])
        by.setdefault(wl, []).append(gaps)
    return {wl: stats(v) for wl, v in sorted(by.items())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("labels", nargs="+")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    out = {}
    for lab in a.labels:
        out[lab] = label_gaps(a.db, lab)
        for wl, s in out[lab].items():
            print("%-28s %-13s answers %4d tokens %6d  median gap %6s  tokens gap<0.1 %6s <0.5 %6s  answers min gap<0.1 %6s <0.5 %6s <1 %6s"
                  % (lab, wl, s["answers"], s["tokens"], s["token_gap_median"], s["token_gap_lt"]["0.1"], s["token_gap_lt"]["0.5"],
                     s["answer_min_gap_lt"]["0.1"], s["answer_min_gap_lt"]["0.5"], s["answer_min_gap_lt"]["1.0"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
