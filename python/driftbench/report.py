"""`driftbench compare --format json` read into pandas (docs/python.md).

read_compare(source) takes a path, a file object, the JSON text or the
parsed dict, checks its schema version (schema.py) and returns a
Comparison:
  .doc        the whole document (dict)
  .verdict    "deploy", "block", "inconclusive", "error" or "not_gated"
  .exit_code  the exit code compare gave for it
  .workloads  one row per workload: the scalar keys of the document's
              "workloads" entries (n, flips, flip_rate, budget, verdict, ...)
              plus ci95_lo/ci95_hi and decision_ci95_lo/hi
  .flips      one row per flipped pair: workload, prompt_id, direction and
              whatever else the entry has (replicate, risk, divergence)
"""

import io
import json
import os

import pandas as pd

from .schema import check_json_version


def _load(source):
    if isinstance(source, dict):
        return source, "compare JSON"
    if isinstance(source, (bytes, bytearray)):
        source = source.decode("utf-8")
    if isinstance(source, io.IOBase) or hasattr(source, "read"):
        return json.load(source), getattr(source, "name", "compare JSON")
    s = os.fspath(source)
    if s.lstrip().startswith("{"):
        return json.loads(s), "compare JSON"
    with open(s, encoding="utf-8") as f:
        return json.load(f), s


class Comparison:
    def __init__(self, doc, where="compare JSON"):
        check_json_version(doc, where)
        if "workloads" not in doc or "decision" not in doc:
            raise ValueError(f"{where}: not a `driftbench compare --format json` document "
                             "(no \"workloads\" / \"decision\")")
        self.doc = doc
        self.verdict = doc["verdict"]
        self.exit_code = doc["decision"]["exit_code"]
        rows, flips = [], []
        for w in doc["workloads"]:
            r = {k: v for k, v in w.items() if not isinstance(v, (list, dict))}
            for key in ("ci95", "decision_ci95"):
                lo, hi = w.get(key) or (None, None)
                r[key + "_lo"], r[key + "_hi"] = lo, hi
            rows.append(r)
            for f in w.get("flipped", []):
                flips.append({"workload": w["workload"], **f})
        self.workloads = pd.DataFrame(rows)
        cols = ["workload", "prompt_id", "direction"]
        self.flips = pd.DataFrame(flips, columns=cols + sorted({k for f in flips for k in f} - set(cols)))

    def __repr__(self):
        return f"<Comparison {self.doc['baseline']['label']} -> {self.doc['target']['label']}: {self.verdict}>"


def read_compare(source):
    """A Comparison from `driftbench compare --format json` output (path, file,
    text or dict). Raises SchemaError for another schema version."""
    doc, where = _load(source)
    return Comparison(doc, where)
