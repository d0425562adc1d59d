#!/usr/bin/env python3
"""Noise ceiling of every held-out level of the paper's flip table, computed
independently of the C code (numpy), for tests/unit/test_pri.c.

For the test rows of one held-out level (rows whose dimension has that level):
  y_i      = flip_rate_i / 100                     (the rates R^2 is computed on)
  q_i      = num_flips_i / num_comparisons_i
  noise_i  = q_i (1 - q_i) / (num_comparisons_i - 1)   (unbiased for p_i(1-p_i)/n_i)
  ceiling  = 1 - mean(noise) / var(y)              (var: population, ddof=0)
n_configs: distinct experiment_id among the test rows.
Also the table-wide spread tau^2 = var(y) - mean(noise) over all rows.

Run once: python3 tests/data/pri/ceiling_ref.py ../shared/driftbench-ae/data/flip_rates.csv \
              > tests/data/pri/ceiling_paper.csv
"""
import csv
import sys

import numpy as np


def main(path):
    rows = list(csv.DictReader(open(path)))
    dims = ["model", "hardware", "precision", "framework", "workload"]
    y_all = np.array([float(r["flip_rate"]) / 100 for r in rows])
    k_all = np.array([float(r["num_flips"]) for r in rows])
    n_all = np.array([float(r["num_comparisons"]) for r in rows])
    q_all = k_all / n_all
    noise_all = q_all * (1 - q_all) / (n_all - 1)
    tau2 = y_all.var() - noise_all.mean()
    print("name,n_test,n_configs,obs_var,noise_var,ceiling")
    # the whole table: its last column is tau^2 (var - noise), not a ceiling
    print("table_tau2,%d,%d,%.12g,%.12g,%.12g" % (len(rows), len({r["experiment_id"] for r in rows}), y_all.var(),
                                                 noise_all.mean(), tau2))
    for d in dims:
        levels = sorted({r[d] for r in rows})
        if len(levels) < 3:
            continue
        for lv in levels:
            idx = [i for i, r in enumerate(rows) if r[d] == lv]
            y, noise = y_all[idx], noise_all[idx]
            ov = y.var()
            ceiling = 1 - noise.mean() / ov if ov > 0 else float("nan")
            ncfg = len({rows[i]["experiment_id"] for i in idx})
            print("%s=%s,%d,%d,%.12g,%.12g,%.12g" % (d, lv, len(idx), ncfg, ov, noise.mean(), ceiling))


if __name__ == "__main__":
    main(sys.argv[1])
