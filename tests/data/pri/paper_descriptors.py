#!/usr/bin/env python3
"""Descriptors of the paper's configurations (for `driftbench pri eval
--descriptor-table`): what each precision level is as a number format, from
the formats' definitions (IEEE fp16: 10 mantissa / 5 exponent bits; FP8 E4M3:
3 / 4; FP4 E2M1: 1 / 2), one row per experiment_id of flip_rates.csv.

python3 tests/data/pri/paper_descriptors.py ../shared/driftbench-ae/data/flip_rates.csv \
    > tests/data/pri/paper_descriptors.csv
"""
import csv
import sys

FORMATS = {"fp16": (10, 5), "fp8": (3, 4), "fp4": (1, 2)}

rows = list(csv.DictReader(open(sys.argv[1])))
print("experiment_id,mantissa_bits,exponent_bits")
seen = set()
for r in rows:
    if r["experiment_id"] in seen:
        continue
    seen.add(r["experiment_id"])
    m, e = FORMATS[r["precision"]]
    print("%s,%d,%d" % (r["experiment_id"], m, e))
