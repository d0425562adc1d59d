#!/usr/bin/python3
"""pri_ref.py - reference held-out-level R^2 of the PRI with fixed
hyper-parameters (depth 4, eta 0.1, min_child_weight 1, 200 trees, hist,
seed 42, 1 thread), computed with Debian's python3-xgboost on the same 56
features (one-hot + precision x workload, framework x workload,
hardware x precision; levels sorted). The held-out splits are deterministic
(train without one level, test on it), so src/analysis/pri_eval.c with tune = 0
must give the same figures; tests/unit/test_pri.c compares them.

    /usr/bin/python3 tools/ref/pri_ref.py ../shared/driftbench-ae/data/flip_rates.csv \
        > tests/data/anova/pri_heldout_fixed.csv
"""
import sys

import numpy as np
import pandas as pd
import xgboost as xgb
from sklearn.metrics import r2_score

DIMS = ["model", "hardware", "precision", "framework", "workload"]
PAIRS = [("precision", "workload"), ("framework", "workload"), ("hardware", "precision")]


def features(df):
    cols = {}
    for d in DIMS:
        for lv in sorted(df[d].unique()):
            cols[f"{d}={lv}"] = (df[d] == lv).astype(np.float32).values
    for a, b in PAIRS:
        for la in sorted(df[a].unique()):
            for lb in sorted(df[b].unique()):
                cols[f"{a}={la} x {b}={lb}"] = ((df[a] == la) & (df[b] == lb)).astype(np.float32).values
    return pd.DataFrame(cols)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/driftbench-ae/data/flip_rates.csv"
    df = pd.read_csv(path)
    X = features(df).values
    y = df.flip_rate.values.astype(np.float32)
    p = dict(objective="reg:squarederror", tree_method="hist", max_depth=4, eta=0.1, min_child_weight=1,
             seed=42, nthread=1, verbosity=0)
    print("held_out,n_train,n_test,train_r2,test_r2")
    for d in DIMS:
        for lv in sorted(df[d].unique()):
            m = (df[d] == lv).values
            if m.sum() < 2 or (~m).sum() < 10:
                continue
            b = xgb.train(p, xgb.DMatrix(X[~m], label=y[~m]), 200)
            tr = r2_score(y[~m], b.predict(xgb.DMatrix(X[~m])))
            te = r2_score(y[m], b.predict(xgb.DMatrix(X[m])))
            print(f"{d}={lv},{(~m).sum()},{m.sum()},{tr!r},{te!r}")


if __name__ == "__main__":
    main()
