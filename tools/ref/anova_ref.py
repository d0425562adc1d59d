#!/usr/bin/python3
"""anova_ref.py - expected ANOVA tables for tests/unit/test_anova.c.

Run with Debian's python3 (python3-statsmodels, python3-pandas):
    /usr/bin/python3 tools/ref/anova_ref.py ../shared/driftbench-ae/data/flip_rates.csv \
        > tests/data/anova/expected.csv

For the whole table and for each workload stratum (workload term dropped),
and for types 1, 2, 3 it writes two kinds of rows:

  source=statsmodels  anova_lm(ols(formula), typ=T) as statsmodels prints it,
                      plus `stable`: 1 when the F value is the same (to 1e-6
                      relative) after shuffling the rows 6 times. On a
                      rank-deficient design (hardware x precision has empty
                      cells) statsmodels' Type I interaction and Type II
                      lower-order terms depend on floating-point noise, so
                      they are marked 0 and are not a reference.
  source=nested       the well-defined Type I / II values from nested model
                      fits: SS = ssr(reduced) - ssr(larger), df = rank
                      difference, F = SS/df/MSE(full). (Type III is always
                      statsmodels' Wald test, which is stable.)

p_bh is statsmodels' multipletests(fdr_bh) over the table's term rows.
"""
import sys
import warnings

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy.stats import f as fdist
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")

TERMS = ["C(hardware)", "C(precision)", "C(framework)", "C(workload)", "C(hardware):C(precision)"]


def formula(terms):
    return "flip_rate ~ " + "+".join(terms)


def contains(a, b):
    fa, fb = set(a.split(":")), set(b.split(":"))
    return fb < fa


def emit(out, stratum, typ, source, term, df, ss, F, p, pbh, stable):
    def g(x):
        return "" if x is None or (isinstance(x, float) and np.isnan(x)) else repr(float(x))
    out.append(f"{stratum},{typ},{source},{term},{g(df)},{g(ss)},{g(F)},{g(p)},{g(pbh)},{stable}")


def one(out, df, stratum, terms):
    f = formula(terms)
    full = smf.ols(f, df).fit()
    mse = full.ssr / full.df_resid
    for typ in (1, 2, 3):
        a = sm.stats.anova_lm(full, typ=typ)
        shuffled = []
        for seed in range(1, 7):
            d2 = df.sample(frac=1, random_state=seed)
            shuffled.append(sm.stats.anova_lm(smf.ols(f, d2).fit(), typ=typ))
        terms_rows = [t for t in a.index if t != "Residual"]
        pbh = multipletests(a.loc[terms_rows, "PR(>F)"].values, method="fdr_bh")[1]
        for i, t in enumerate(terms_rows):
            F = a.loc[t, "F"]
            stable = int(all(abs(s.loc[t, "F"] - F) <= 1e-6 * abs(F) + 1e-12 for s in shuffled))
            emit(out, stratum, typ, "statsmodels", t, a.loc[t, "df"], a.loc[t, "sum_sq"], F,
                 a.loc[t, "PR(>F)"], pbh[i], stable)
        emit(out, stratum, typ, "statsmodels", "Residual", a.loc["Residual", "df"],
             a.loc["Residual", "sum_sq"], None, None, None, 1)
    # well-defined Type I and II by nested fits
    def fit(ts):
        return smf.ols(formula(ts) if ts else "flip_rate ~ 1", df).fit()
    rows1 = []
    for i, t in enumerate(terms):
        a, b = fit(terms[:i]), fit(terms[: i + 1])
        rows1.append((t, a.ssr - b.ssr, b.df_model - a.df_model))
    rows2 = []
    for t in terms:
        keep = [u for u in terms if u != t and not contains(u, t)]
        a, b = fit(keep), fit(keep + [t])
        rows2.append((t, a.ssr - b.ssr, b.df_model - a.df_model))
    for typ, rows in ((1, rows1), (2, rows2)):
        Fs = [ss / d / mse for _, ss, d in rows]
        ps = [fdist.sf(F, d, full.df_resid) for F, (_, _, d) in zip(Fs, rows)]
        pbh = multipletests(ps, method="fdr_bh")[1]
        for (t, ss, d), F, p, q in zip(rows, Fs, ps, pbh):
            emit(out, stratum, typ, "nested", t, d, ss, F, p, q, 1)
        emit(out, stratum, typ, "nested", "Residual", full.df_resid, full.ssr, None, None, None, 1)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/driftbench-ae/data/flip_rates.csv"
    df = pd.read_csv(path)
    out = ["stratum,type,source,term,df,sum_sq,F,p,p_bh,stable"]
    one(out, df, "all", TERMS)
    for w in sorted(df.workload.unique()):
        one(out, df[df.workload == w], "workload=" + w, [t for t in TERMS if "workload" not in t])
    print("\n".join(out))


if __name__ == "__main__":
    main()
