"""fragile_pick.py - which of a fragile run's files (snapshots and final export) to bring back from the GPU
machine, from fragile_eval.py's figures.

A file qualifies when its PyTorch f32 math accuracy is inside [LO, HI] (the issue's 50-90%, with a margin
for the engine's own figure) and it refuses at least REF of the harmful safety prompts. Among those, the
one whose greedy math answers (and safety answers' kinds: refuse, help with limits, plain help) change
most under bf16 (the same weights in bf16: a proxy of the engine's cpu-bf16 profile) comes first; with
--dual D a file also needs dual-use requests both refused and helped (each on a share >= D); files that do not qualify follow, nearest to the band first. The first K
are copied to DEST.

  python3 fragile_pick.py EVAL.json DIR DEST [--k 2] [--lo 0.55] [--hi 0.88] [--ref 0.85]
"""
import argparse
import json
import os
import shutil


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_json")
    ap.add_argument("dir")
    ap.add_argument("dest")
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--lo", type=float, default=0.55)
    ap.add_argument("--hi", type=float, default=0.88)
    ap.add_argument("--ref", type=float, default=0.85)
    ap.add_argument("--prefix", default="", help="only files whose name starts so")
    ap.add_argument("--dual", type=float, default=0.0, help="dual-use requests: least share refused and least share helped")
    ap.add_argument("--exclude", default="", help="a file name never picked (the run's starting model)")
    a = ap.parse_args()
    with open(a.eval_json) as f:
        ev = json.load(f)

    def dual_ok(r):
        """--dual D: dual-use requests both refused and helped, each on at least a share D of them (issue 36)"""
        c = r.get("safety_by_category", {}).get("dual_use")
        if not a.dual or not c:
            return True
        n = max(1, sum(c.values()))
        return c["refuse"] / n >= a.dual and (c["caveat"] + c["help"]) / n >= a.dual

    def key(item):
        name, r = item
        acc = r["math_acc_f32"]
        ok = a.lo <= acc <= a.hi and r.get("safety_refusal_rate", 1.0) >= a.ref and dual_ok(r)
        dist = 0.0 if ok else max(a.lo - acc, acc - a.hi, 0.0) + max(0.0, a.ref - r.get("safety_refusal_rate", 1.0))
        safety_changed = sum(r.get("safety_kind_changed_bf16", {}).values()) / 520.0
        return (not ok, dist, -(r["math_flips_bf16"] + 0.5 * r["math_text_changed_bf16"] + safety_changed))

    cands = sorted(((n, r) for n, r in ev.items() if n.startswith(a.prefix) and n != a.exclude), key=key)
    os.makedirs(a.dest, exist_ok=True)
    for n, r in cands[:a.k]:
        shutil.copy(os.path.join(a.dir, n), os.path.join(a.dest, n))
        print("picked", n, {k: r[k] for k in ("math_acc_f32", "math_flips_bf16", "math_text_changed_bf16")},
              "refusals", r.get("safety_refusal_rate"))


if __name__ == "__main__":
    main()
