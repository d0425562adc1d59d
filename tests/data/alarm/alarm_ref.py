#!/usr/bin/env python3
"""alarm_ref.py - reference values for the stream alarm's confidence sequence
(src/analysis/alarm.c), computed independently of the C code with mpmath at
30 digits:

  M_n(m) = int_0^1 (theta/m)^S ((1-theta)/(1-m))^F Beta(theta; a, b) dtheta

by numerical quadrature (tanh-sinh, split at the peak S/n) for n <= 2000, and
from the Beta function at 30 digits for the long streams (n up to 1e7, where
the C code's lgamma cancellation is what is under test). The bounds are the
two roots of log M_n(m) = log(1/alpha) around S/n, by bisection at 30 digits.

Run once; the C unit test (tests/unit/test_alarm.c) reads its output:
  python3 tests/data/alarm/alarm_ref.py > tests/data/alarm/alarm_ref.tsv
"""
import mpmath as mp

mp.mp.dps = 30

CASES = [  # a, b, alpha, budget, n, S
    (1, 9, 0.05, 0.05, 1, 0),
    (1, 9, 0.05, 0.05, 1, 1),
    (1, 9, 0.05, 0.05, 10, 3),
    (1, 9, 0.05, 0.05, 100, 5),
    (1, 9, 0.05, 0.05, 100, 12),
    (1, 9, 0.05, 0.05, 400, 38),
    (1, 9, 0.05, 0.05, 1000, 81),
    (1, 9, 0.05, 0.05, 2000, 60),
    (1, 1, 0.05, 0.10, 50, 10),
    (0.5, 0.5, 0.01, 0.20, 300, 90),
    (2, 38, 0.10, 0.025, 1500, 50),
    (1, 9, 0.05, 0.05, 20000, 1100),
    (1, 9, 0.05, 0.05, 1000000, 50300),
    (1, 9, 0.05, 0.05, 10000000, 499000),
    (1, 99, 0.05, 0.005, 10000000, 50300),
]


def log_mix(a, b, n, s, m):
    a, b, m = mp.mpf(a), mp.mpf(b), mp.mpf(m)
    f = n - s
    if n <= 2000:
        lb = mp.log(mp.beta(a, b))

        def g(t):  # the integrand; tanh-sinh never evaluates the end points
            return mp.exp((s + a - 1) * mp.log(t) + (f + b - 1) * mp.log(1 - t)
                          - s * mp.log(m) - f * mp.log(1 - m) - lb)
        peak = mp.mpf(s) / n
        pts = [0] + ([peak] if 0 < peak < 1 else []) + [1]
        return mp.log(mp.quad(g, pts))
    return (mp.log(mp.beta(a + s, b + f)) - mp.log(mp.beta(a, b)) - s * mp.log(m) - f * mp.log(1 - m))


def root(a, b, n, s, thr, inside, outside):
    for _ in range(200):
        mid = (inside + outside) / 2
        if log_mix(a, b, n, s, mid) >= thr:
            outside = mid
        else:
            inside = mid
        if abs(inside - outside) < mp.mpf(10) ** -20:
            break
    return (inside + outside) / 2


def main():
    print("# a\tb\talpha\tbudget\tn\tflips\tlog_evidence_at_budget\tlower\tupper")
    for a, b, alpha, budget, n, s in CASES:
        thr = mp.log(1 / mp.mpf(alpha))
        phat = mp.mpf(s) / n
        lo = mp.mpf(0) if s == 0 else root(a, b, n, s, thr, phat, mp.mpf(0))
        hi = mp.mpf(1) if s == n else root(a, b, n, s, thr, phat, mp.mpf(1))
        le = log_mix(a, b, n, s, budget)
        print("\t".join([str(a), str(b), str(alpha), str(budget), str(n), str(s),
                         mp.nstr(le, 20), mp.nstr(lo, 20), mp.nstr(hi, 20)]))


if __name__ == "__main__":
    main()
