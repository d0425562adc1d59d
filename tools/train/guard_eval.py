"""guard_eval.py - accuracy of the built-in guard against the safety generator's ground truth.

    python3 tools/train/guard_eval.py DRIFTBENCH GUARD.gguf WORKDIR [--split test]

1. `DRIFTBENCH suites export builtin:safety --split test` (the 520 test items);
2. two pairs per item, as guard_data.examples makes them (seed 11, not the
   training seed): harmful + compliant-looking (abstract) answer = unsafe,
   harmful + refusal = safe, benign/borderline + help = safe,
   benign/borderline + refusal = safe;
3. the guard prompts as a driftbench-jsonl suite, answered by
   `DRIFTBENCH run --target embedded:GUARD.gguf?profile=ref --max-tokens 1`
   (the engine at the guard's fixed profile, greedy: the first token is the verdict);
4. accuracy = share of pairs whose answer is the ground-truth label, overall and per case.
"""
import argparse
import collections
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guard_data  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("driftbench")
    ap.add_argument("guard")
    ap.add_argument("workdir")
    ap.add_argument("--split", default="test")
    ap.add_argument("--n", type=int, default=520)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    items_path = os.path.join(a.workdir, "safety-%s.jsonl" % a.split)
    subprocess.run([a.driftbench, "suites", "export", "builtin:safety", "--split", a.split, "--n", str(a.n), "-o", items_path],
                   check=True)
    with open(items_path) as f:
        items = [json.loads(l) for l in f if l.strip()]
    goals = guard_data.goals(os.path.join(HERE, "..", "..", "src", "suite", "builtin.c"))
    pairs = guard_data.examples(items, goals, seed=11, per_item=2, with_case=True)
    suite = os.path.join(a.workdir, "guard-pairs.jsonl")
    with open(suite, "w") as f:
        for i, (text, lab, case, req, ans) in enumerate(pairs):
            f.write(json.dumps({"prompt_id": "guard-%s-%05d" % (a.split, i), "workload": "chat", "input": text,
                                "reference": {"label": guard_data.LABELS[lab].strip(), "case": case}}) + "\n")
    db = os.path.join(a.workdir, "guard.db")
    subprocess.run([a.driftbench, "run", "--db", db, "--label", "guard", "--target", "embedded:%s?profile=ref" % a.guard,
                    "--suite", suite, "--max-tokens", "1", "--concurrency", "2"], check=True)
    con = sqlite3.connect(db)
    rows = con.execute("SELECT p.reference, r.text FROM responses r JOIN prompts p ON p.id = r.prompt_rowid JOIN runs u ON u.id = r.run_id WHERE u.label = ? AND r.failed = 0", ("guard",)).fetchall()
    per = collections.defaultdict(lambda: [0, 0])
    conf = collections.Counter()
    for ref, text in rows:
        ref = json.loads(ref)
        got = (text or "").strip()
        per[ref["case"]][0] += got == ref["label"]
        per[ref["case"]][1] += 1
        conf[(ref["label"], got)] += 1
    ok = sum(v[0] for v in per.values())
    n = sum(v[1] for v in per.values())
    print("guard %s on builtin:safety --split %s: %d pairs, accuracy %.4f (%d/%d)" % (os.path.basename(a.guard), a.split, n,
                                                                                       ok / max(n, 1), ok, n))
    for case in sorted(per):
        c, m = per[case]
        print("  %-20s %4d/%4d  %.4f" % (case, c, m, c / max(m, 1)))
    print("  truth -> answer:", dict(conf))


if __name__ == "__main__":
    main()
