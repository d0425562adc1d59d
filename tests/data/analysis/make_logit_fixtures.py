#!/usr/bin/python3
"""Fixtures of test_logit.c: a prompt-level logistic model of flips with
prompt-clustered errors, computed once with statsmodels.

Run with Debian's python3 (python3-statsmodels, python3-numpy, python3-pandas):
    /usr/bin/python3 tests/data/analysis/make_logit_fixtures.py > tests/data/analysis/logit_fixtures.json

Each case holds its data (y, cluster = prompt, one level list per factor,
the reference levels) and what statsmodels gives:
    GLM(y ~ C(f, Treatment(ref)) + ..., family=Binomial())
        .fit(cov_type='cluster', cov_kwds={'groups': prompt}, tol=1e-13)
params, bse (cluster-robust, statsmodels' default correction
G/(G-1) (N-1)/(N-K)), z, two-sided normal p, and per factor the Wald chi^2
test that all its levels are 0 (res.wald_test(..., use_f=False)).

Separation. Where a level has no flip (or only flips) its maximum
likelihood coefficient is -inf (+inf): statsmodels still prints a finite
number (where its iterations stopped; recorded as "statsmodels_full_fit"
for the record, not for comparison). driftbench reports such a level as not
estimable and fits on the rest of the data; the expected values are
statsmodels' fit on the same rows ("rows_used"), which is the limit of the
full likelihood as the separated coefficient goes to infinity.

The data are simulated from a logistic model with a random prompt effect
(seeded numpy generator): flips cluster by prompt as in the lab; the last
case is the lab's math pairs the issue's audit read (lab_math_pairs.csv and
lab_configs.csv beside this script: 3,600 pairs, 24 configurations), where
f32 (the reference), cpu-avx2 and splitk4 never flip: the separated levels
are found by the same rule as drift_logit_cluster_fit (levels of factors
with two or more levels whose remaining pairs are all 0 or all 1, removed
until none is left) and statsmodels fits what remains.
"""
import os
import json
import re
import sys
import warnings

import numpy as np
import pandas as pd
import statsmodels.api as sm
import statsmodels.formula.api as smf


def simulate(rng, n_prompts, factors, effects, intercept, prompt_sd):
    """All combinations of the factors' levels for each prompt."""
    import itertools
    u = rng.normal(0.0, prompt_sd, n_prompts)
    rows = []
    names = list(factors)
    for p in range(n_prompts):
        for combo in itertools.product(*[factors[f] for f in names]):
            eta = intercept + u[p] + sum(effects[f].get(l, 0.0) for f, l in zip(names, combo))
            y = int(rng.random() < 1.0 / (1.0 + np.exp(-eta)))
            rows.append(dict(prompt=1000 + 7 * p, y=y, **dict(zip(names, combo))))
    return pd.DataFrame(rows)


def fit(df, names, refs):
    terms = " + ".join(f"C({f}, Treatment('{refs[f]}'))" for f in names)
    model = smf.glm(f"y ~ {terms}", data=df, family=sm.families.Binomial())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = model.fit(cov_type="cluster", cov_kwds={"groups": df["prompt"].values}, tol=1e-13, maxiter=200)
    coefs = []
    for i, name in enumerate(res.params.index):
        if name == "Intercept":
            factor, level = None, None
        else:
            # C(hw, Treatment('x'))[T.lvl]
            factor = name[2:name.index(",")]
            level = name[name.index("[T.") + 3:-1]
        coefs.append(dict(name=name, factor=factor, level=level, est=float(res.params.iloc[i]),
                          se=float(res.bse.iloc[i]), z=float(res.tvalues.iloc[i]), p=float(res.pvalues.iloc[i])))
    terms_out = []
    cols = list(res.params.index)
    for f in names:
        idx = [i for i, c in enumerate(cols) if c.startswith(f"C({f},")]
        if not idx:
            continue
        R = np.zeros((len(idx), len(cols)))
        for r, i in enumerate(idx):
            R[r, i] = 1.0
        w = res.wald_test(R, use_f=False, scalar=True)
        terms_out.append(dict(factor=f, df=len(idx), chi2=float(w.statistic), p=float(w.pvalue)))
    return res, dict(coefs=coefs, terms=terms_out, loglik=float(res.llf), nobs=int(res.nobs),
                     n_clusters=int(df["prompt"].nunique()))


def case(name, df, names, refs, drop=None, note="", refs_used=None):
    used = df if drop is None else df[~drop(df)]
    out = dict(name=name, note=note, y=[int(v) for v in df["y"]], cluster=[int(v) for v in df["prompt"]],
               factors=[dict(name=f, reference=refs[f], levels=[str(v) for v in df[f]]) for f in names],
               rows_used=int(len(used)))
    _, out["expected"] = fit(used, names, refs_used or refs)
    if drop is not None and refs_used is None:
        res_full, full = fit(df, names, refs)
        out["statsmodels_full_fit"] = dict(coefs=[dict(name=c["name"], est=c["est"], se=c["se"]) for c in full["coefs"]],
                                           converged=bool(res_full.converged))
    return out


def separated_rows(df, names):
    """The rows left once separated levels are removed (the C rule), and the levels removed."""
    multi = [f for f in names if df[f].nunique() >= 2]
    keep = np.ones(len(df), dtype=bool)
    removed = []
    while True:
        sep = []
        for f in multi:
            g = df[keep].groupby(f)["y"].agg(["sum", "count"])
            for level, r in g.iterrows():
                if r["sum"] == 0 or r["sum"] == r["count"]:
                    sep.append((f, level))
        if not sep:
            return keep, removed
        removed += sep
        for f, level in sep:
            keep &= ~(df[f] == level).values


def lab_case():
    here = os.path.dirname(os.path.abspath(__file__))
    pairs = pd.read_csv(os.path.join(here, "lab_math_pairs.csv"))
    cfg = pd.read_csv(os.path.join(here, "lab_configs.csv"))
    df = pairs.merge(cfg, on="config", how="left")
    df["y"] = (df["base_ok"] != df["cfg_ok"]).astype(int)
    df = df.rename(columns={"prompt": "prompt"})
    names = ["model", "hardware", "precision", "framework"]
    refs = {"model": "llama-fragile-7m", "hardware": "cpu-best", "precision": "f32", "framework": "seq"}
    keep, removed = separated_rows(df, names)
    used = df[keep]
    refs_used = {}
    fit_names = []
    for f in names:
        left = sorted(used[f].unique())
        if len(left) >= 2:
            fit_names.append(f)
            refs_used[f] = refs[f] if refs[f] in left else left[0]
    out = dict(name="lab_math", note="the audited lab's math pairs; separated: "
               + ", ".join(f"{f}={l}" for f, l in removed),
               y=[int(v) for v in df["y"]], cluster=[int(v) for v in df["prompt"]],
               factors=[dict(name=f, reference=refs[f], levels=[str(v) for v in df[f]]) for f in names],
               rows_used=int(len(used)), separated=[dict(factor=f, level=l) for f, l in removed],
               reference_used=refs_used)
    _, out["expected"] = fit(used, fit_names, refs_used)
    out["expected"]["n_clusters"] = int(used["prompt"].nunique())
    return out


def main():
    rng = np.random.default_rng(20261206)
    cases = []
    # 1. crossed hardware x precision, references not first in sort order
    f1 = {"hardware": ["avx2", "cpu-best", "gpu-sim"], "precision": ["bf16", "fp8", "int8"]}
    e1 = {"hardware": {"avx2": 0.4, "gpu-sim": -0.3}, "precision": {"fp8": 0.9, "int8": 1.4}}
    d1 = simulate(rng, 80, f1, e1, -2.2, 1.0)
    cases.append(case("crossed", d1, list(f1), {"hardware": "cpu-best", "precision": "bf16"},
                      note="3x3 crossed, 80 prompts, random prompt effect sd 1"))
    # 2. a framework level that never flips (quasi-complete separation)
    f2 = {"hardware": ["avx2", "cpu-best"], "precision": ["bf16", "fp8", "int8"], "framework": ["sglang", "trt", "vllm"]}
    e2 = {"hardware": {"avx2": 0.5}, "precision": {"fp8": 0.8, "int8": 1.2}, "framework": {"sglang": 0.6}}
    d2 = simulate(rng, 60, f2, e2, -2.0, 1.2)
    d2.loc[d2["framework"] == "trt", "y"] = 0   # trt: no flips at all
    cases.append(case("separated", d2, list(f2), {"hardware": "cpu-best", "precision": "bf16", "framework": "vllm"},
                      drop=lambda d: d["framework"] == "trt",
                      note="framework=trt has no flips: not estimable, its rows leave the fit"))
    # 3. the reference level itself never flips: the next level becomes the reference
    f3 = {"hardware": ["avx2", "cpu-best", "neon"], "precision": ["bf16", "fp8", "int8"]}
    e3 = {"hardware": {"avx2": 0.3, "neon": -0.4}, "precision": {"fp8": 1.0, "int8": 1.5}}
    d3 = simulate(rng, 70, f3, e3, -1.5, 0.8)
    d3.loc[d3["precision"] == "bf16", "y"] = 0  # the reference precision never flips
    c3 = case("reference_separated", d3, ["hardware", "precision"], {"hardware": "cpu-best", "precision": "bf16"},
              drop=lambda d: d["precision"] == "bf16", refs_used={"hardware": "cpu-best", "precision": "fp8"},
              note="precision=bf16 (the reference) has no flips: its rows leave the fit, fp8 (first left) is the reference")
    cases.append(c3)
    cases.append(lab_case())
    text = json.dumps(dict(generator="tests/data/analysis/make_logit_fixtures.py", statsmodels=sm.__version__,
                           cases=cases), indent=1)
    # the data arrays (y, cluster, levels) one line each
    text = re.sub(r"\[\n\s*((?:(?:-?[0-9.e+-]+|\"[^\"\n]*\"),\n\s*)*(?:-?[0-9.e+-]+|\"[^\"\n]*\"))\n\s*\]",
                  lambda m: "[" + re.sub(r",\n\s*", ",", m.group(1)) + "]", text)
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
