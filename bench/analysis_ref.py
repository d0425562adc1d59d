#!/usr/bin/python3
"""analysis_ref.py - the same analysis as bench/analysis_bench.c, in Python,
for the speed ratio: statsmodels anova_lm types 1/2/3 (+ 4 workload strata
each), then the PRI evaluation with xgboost (same features; the same
evaluations: random 80/20, 5-fold, 20 held-out levels, 2 xgboost ablations +
a linear model, importance), twice: fixed hyper-parameters (depth 4, eta 0.1,
200 trees, hist, 1 thread) and tuned as src/analysis/pri_eval.c tunes: depth
{3,5} at eta 0.3, 3 inner folds grown side by side one tree at a time, the
tree count by early stopping on the summed validation error (patience 10,
minimum gain 0.3%, at most 300 trees), matrices built once per fold, one
thread everywhere (the C side runs its evaluations on 1 or 2 threads).

    /usr/bin/python3 bench/analysis_ref.py [flip_rates.csv] [reps]
"""
import sys
import time
import warnings

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
import xgboost as xgb
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

warnings.simplefilter("ignore")
F = "flip_rate ~ C(hardware)+C(precision)+C(framework)+C(workload)+C(hardware):C(precision)"
FS = "flip_rate ~ C(hardware)+C(precision)+C(framework)+C(hardware):C(precision)"
DIMS = ["model", "hardware", "precision", "framework", "workload"]
PAIRS = [("precision", "workload"), ("framework", "workload"), ("hardware", "precision")]


def features(df, dims=DIMS, inter=True):
    cols = {}
    for d in dims:
        for lv in sorted(df[d].unique()):
            cols[f"{d}={lv}"] = (df[d] == lv).astype(np.float32).values
    if inter:
        for a, b in PAIRS:
            for la in sorted(df[a].unique()):
                for lb in sorted(df[b].unique()):
                    cols[f"{a}={la} x {b}={lb}"] = ((df[a] == la) & (df[b] == lb)).astype(np.float32).values
    return pd.DataFrame(cols)


GRID = [(3, 0.3, 1), (5, 0.3, 1)]
MAX_ROUNDS, PATIENCE, MIN_GAIN = 300, 10, 0.003


def params(depth, eta, mcw):
    return dict(objective="reg:squarederror", tree_method="hist", max_depth=depth, eta=eta,
                min_child_weight=mcw, seed=42, nthread=1, verbosity=0)


def dmat(X, y=None):
    return xgb.DMatrix(X, label=y, nthread=1)


def train(X, y, depth=4, eta=0.1, mcw=1, rounds=200):
    return xgb.train(params(depth, eta, mcw), dmat(X, y), rounds)


def tune(X, y, tuned, rng):
    if not tuned:
        return dict(depth=4, eta=0.1, mcw=1, rounds=200)
    idx = rng.permutation(len(y))
    fold = np.arange(len(y)) % 3
    folds = [(dmat(X[idx[fold != f]], y[idx[fold != f]]), dmat(X[idx[fold == f]]), y[idx[fold == f]])
             for f in range(3)]
    best = None
    for d, e, m in GRID:
        boosters = [xgb.Booster(params(d, e, m), [dtr, dva]) for dtr, dva, _ in folds]
        best_sse, best_r, last_gain = np.inf, 0, 0
        for r in range(MAX_ROUNDS):
            s = 0.0
            for b, (dtr, dva, yva) in zip(boosters, folds):
                b.update(dtr, r)
                s += float(((b.predict(dva).astype(np.float64) - yva) ** 2).sum())
            if s < best_sse:
                if s < best_sse * (1 - MIN_GAIN):
                    last_gain = r + 1
                best_sse, best_r = s, r + 1
            if r + 1 - last_gain >= PATIENCE:
                break
        if best is None or best_sse < best[0]:
            best = (best_sse, dict(depth=d, eta=e, mcw=m, rounds=best_r))
    return best[1]


def split_r2(X, y, tr, te, tuned, rng):
    hp = tune(X[tr], y[tr], tuned, rng)
    b = train(X[tr], y[tr], **hp)
    return r2_score(y[te], b.predict(dmat(X[te])))


def pri_eval(df, tuned):
    rng = np.random.default_rng(42)
    y = df.flip_rate.values.astype(np.float32)
    X = features(df).values
    Xno = features(df, inter=False).values
    Xhw = features(df, dims=["hardware"], inter=False).values
    n = len(y)
    perm = rng.permutation(n)
    te, tr = perm[: n // 5], perm[n // 5:]
    out = {"random": split_r2(X, y, tr, te, tuned, rng)}
    out["no_inter"] = split_r2(Xno, y, tr, te, tuned, rng)
    out["hw_only"] = split_r2(Xhw, y, tr, te, tuned, rng)
    out["linear"] = r2_score(y[te], LinearRegression().fit(Xno[tr], y[tr]).predict(Xno[te]))
    out["cv5"] = np.mean([split_r2(X, y, perm[np.arange(n) % 5 != k], perm[np.arange(n) % 5 == k], tuned, rng)
                          for k in range(5)])
    for d in DIMS:
        for lv in sorted(df[d].unique()):
            m = (df[d] == lv).values
            if m.sum() >= 2 and (~m).sum() >= 10:
                out[f"{d}={lv}"] = split_r2(X, y, np.where(~m)[0], np.where(m)[0], tuned, rng)
    hp = tune(X, y, tuned, rng)
    train(X, y, **hp).get_score(importance_type="total_gain")
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/driftbench-ae/data/flip_rates.csv"
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    df = pd.read_csv(path)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(reps):
        for typ in (1, 2, 3):
            sm.stats.anova_lm(smf.ols(F, df).fit(), typ=typ)
            for w in sorted(df.workload.unique()):
                sm.stats.anova_lm(smf.ols(FS, df[df.workload == w]).fit(), typ=typ)
    aw, ac = (time.perf_counter() - t0) / reps * 1000, (time.process_time() - c0) / reps * 1000
    print(f"python anova types 1+2+3 (+4 workload strata each): {aw:.1f} ms wall, {ac:.1f} ms cpu (mean of {reps})")
    for tuned in (False, True):
        t0, c0 = time.perf_counter(), time.process_time()
        out = pri_eval(df, tuned)
        pw, pc = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        name = "tuned" if tuned else "fixed"
        print(f"python pri eval ({name}): {pw:.0f} ms wall, {pc:.0f} ms cpu; random-split R2 {out['random']:.4f}, "
              f"held-out b200 {out['hardware=b200']:.4f} fp4 {out['precision=fp4']:.4f} "
              f"sglang {out['framework=sglang']:.4f} qwen-7b {out['model=qwen-7b']:.4f}")
        print(f"python total anova + pri eval ({name}): {pw + aw:.0f} ms wall, {pc + ac:.0f} ms cpu")


if __name__ == "__main__":
    main()
