"""The CLI's JSON documents read into pandas (docs/python.md):
`driftbench compare --format json`, `runs list --json`, `runs show --json`
and `version --format json`. Each source is a path, a file object, the JSON
text or the parsed dict, and each document's schema version is checked
first (schema.py): SchemaError for another.

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
read_runs(source)    `runs list --json`: a DataFrame, one row per run
read_run(source)     `runs show --json`: the run's dict
read_version(source) `version --format json`: the build's dict
"""

import io
import json
import os

import pandas as pd

from .schema import JSON_SCHEMA_VERSION, SchemaError, check_json_version


def _load(source, what="compare JSON"):
    if isinstance(source, dict):
        return source, what
    if isinstance(source, (bytes, bytearray)):
        source = source.decode("utf-8")
    if isinstance(source, io.IOBase) or hasattr(source, "read"):
        return json.load(source), getattr(source, "name", what)
    s = os.fspath(source)
    if s.lstrip().startswith(("{", "[")):
        return json.loads(s), what
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


def _document(source, what, keys):
    """The checked document of `what` (a dict with schema_version and keys)."""
    doc, where = _load(source, what)
    check_json_version(doc, where)
    missing = [k for k in keys if k not in doc]
    if missing:
        raise ValueError(f"{where}: not a `driftbench {what}` document (no {', '.join(repr(k) for k in missing)})")
    return doc


RUN_COLUMNS = ["label", "target_kind", "target", "model", "responses", "answers", "failed", "scored",
               "embeddings", "created", "finished", "last_resumed", "resumes", "endpoints", "locked"]


def read_runs(source):
    """`driftbench runs list --json` (path, file, text or dict) as a DataFrame,
    one row per run, oldest first. Raises SchemaError for another schema
    version (a bare array is the listing of a DriftBench before version 1)."""
    doc, where = _load(source, "runs list --json")
    if isinstance(doc, list):
        raise SchemaError(f"{where}: a bare JSON array: `runs list --json` of a DriftBench older than JSON "
                          f"schema {JSON_SCHEMA_VERSION} (docs/json-schema.md)")
    doc = _document(doc, "runs list --json", ["runs"])
    rows = doc["runs"]
    return pd.DataFrame(rows, columns=RUN_COLUMNS + sorted({k for r in rows for k in r} - set(RUN_COLUMNS)))


def read_run(source):
    """`driftbench runs show LABEL --json` as a dict (identity, config,
    decoding, endpoint_history, workloads, ...). Raises SchemaError for
    another schema version."""
    return _document(source, "runs show --json", ["label", "identity", "workloads"])


def read_version(source):
    """`driftbench version --format json` as a dict (version, commit, build,
    libraries, data). Raises SchemaError for another schema version."""
    return _document(source, "version --format json", ["version", "build", "data"])
