#!/usr/bin/env python3
"""bench/cuda_trace.py TRACE [--layers] - the timeline of one traced CUDA pass.

A build configured with -DDRIFT_CUDA_TRACE=ON stamps %globaltimer from
thread 0 of every block of the backend's kernels: at the kernel's start
(kind 0, its griddepcontrol.launch_dependents), when its wait on the
previous kernel returns (kind 1), when the product kernels' last warp has
its weights multiplied (kind 3) and at exit (kind 2, the kernels that
declare DCU_TR_EXIT). With DRIFT_CUDA_TRACE_OUT=FILE in the environment the
DRIFT_CUDA_TRACE_AT-th pass of one row (default 40) is traced and its
records written to FILE, a line each: t kind grid block threads sm unit.

This prints one line per launch, in order: when its blocks entered, when
their waits returned, the last weight product, the first and last exit, the
next launch's first wait return, and
  span        from this launch's first wait return to the next one's: the
              time the launch holds the pass's critical path
  exit->next  from its last block's exit to the next launch's first wait
              return: what the dependency itself costs
With --layers, the mean span of each launch position within a layer
(launches are grouped by the repeating pattern of grid and block sizes).

Launches are told apart by (unit, grid, threads); records of a launch are
matched to it in time order, one start per block.
"""
import collections
import sys


def load(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 7:
                sys.exit("%s:%d: expected 7 fields, got %d" % (path, n, len(parts)))
            t, kind, grid, blk, nthr, sm = (int(x) for x in parts[:6])
            recs.append((t, kind, grid, blk, nthr, sm, parts[6]))
    if not recs:
        sys.exit("%s: no records" % path)
    recs.sort()
    return recs


def launches(recs):
    out = []
    open_by_sig = collections.defaultdict(list)
    for t, kind, grid, blk, nthr, sm, unit in recs:
        sig = (unit, grid, nthr)
        if kind == 0:
            L = next((c for c in open_by_sig[sig] if blk not in c["e"]), None)
            if L is None:
                L = {"sig": sig, "e": {}, "w": {}, "x": {}, "m": {}}
                out.append(L)
                open_by_sig[sig].append(L)
            L["e"][blk] = t
            if len(L["e"]) == grid:
                open_by_sig[sig].remove(L)
            continue
        L = next((c for c in reversed(out) if c["sig"] == sig and blk in c["e"] and c["e"][blk] <= t), None)
        if L is None:
            continue
        key = {1: "w", 2: "x", 3: "m"}.get(kind)
        if key and not (key == "w" and blk in L["w"]):
            L[key][blk] = t
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    recs = load(sys.argv[1])
    t0 = recs[0][0]
    us = lambda t: (t - t0) / 1e3 if t is not None else float("nan")
    rows = []
    for L in launches(recs):
        ent = sorted(L["e"].values())
        w = sorted(L["w"].values())
        x = sorted(L["x"].values())
        m = sorted(L["m"].values())
        rows.append(dict(sig=L["sig"], e0=ent[0], e1=ent[-1], w0=w[0] if w else None, w1=w[-1] if w else None,
                         m1=m[-1] if m else None, x0=x[0] if x else None, x1=x[-1] if x else None))
    spans = []
    print("launch unit grid threads | entry | wait | products done | exit | next wait | span | exit->next (us)")
    for i, r in enumerate(rows):
        nw = rows[i + 1]["w0"] if i + 1 < len(rows) else None
        span = (nw - r["w0"]) / 1e3 if nw is not None and r["w0"] is not None else float("nan")
        gap = (nw - r["x1"]) / 1e3 if nw is not None and r["x1"] is not None else float("nan")
        spans.append(span)
        u, g, n = r["sig"]
        print("%4d %s %5d %4d | %8.2f %8.2f | %8.2f %8.2f | %8.2f | %8.2f %8.2f | %8.2f | %6.2f | %5.2f"
              % (i, u, g, n, us(r["e0"]), us(r["e1"]), us(r["w0"]), us(r["w1"]), us(r["m1"]), us(r["x0"]),
                 us(r["x1"]), us(nw), span, gap))
    if "--layers" in sys.argv:
        sigs = [r["sig"] for r in rows]
        # the layer pattern: the shortest period p with sigs[i] == sigs[i + p] over the middle of the pass
        best = None
        for p in range(2, 16):
            mid = range(len(sigs) // 4, 3 * len(sigs) // 4 - p)
            if len(mid) > p and all(sigs[i] == sigs[i + p] for i in mid):
                best = p
                break
        if not best:
            print("no repeating layer pattern")
            return
        start = next(i for i in range(len(sigs)) if all(sigs[i + k] == sigs[i + k + best] for k in range(best)))
        per = collections.defaultdict(list)
        for i in range(start, len(rows) - best, 1):
            if all(sigs[j] == sigs[j + best] for j in range(i - (i - start) % best, i - (i - start) % best + best)):
                per[(i - start) % best].append(spans[i])
        print("\nmean span by position in a layer (%d launches a layer):" % best)
        for k in range(best):
            v = [s for s in per[k] if s == s]
            u, g, n = sigs[start + k]
            print("  %d %s grid %5d threads %4d: %6.2f us over %d layers" % (k, u, g, n, sum(v) / len(v), len(v)))


if __name__ == "__main__":
    main()
