"""A DriftBench store read into pandas DataFrames (docs/python.md).

open_store(where) takes an SQLite file path or a PostgreSQL URL
(postgresql://..., postgres://...; needs psycopg2, Debian's
python3-psycopg2) and returns a Store, read-only:

  runs()                         one row per run
  answers(run=None)              one row per stored answer (response)
  scores(run=None, evaluator=None, latest=True)
                                 the scores of the answers; latest=True keeps
                                 each answer's latest score (of `evaluator`
                                 when given), the one compare counts
  pairs(baseline, target, evaluator=None)
                                 the two runs' answers paired by prompt and
                                 replicate, each pair in compare's buckets
  flip_table(baseline, target, evaluator=None)
                                 per workload: counted pairs, flips, rate,
                                 directions, errors and unscored pairs

Pairs follow compare (src/analysis/compare.c): a pair is "errors" when either
side's request failed or its evaluator gave an error (label -1), else
"unscored" when either side has no score, else counted, and a flip when the
two labels differ (pass_to_fail: baseline passed, target failed). Chat pairs
are compared by embeddings (semantic drift), not labels: they get the bucket
"pairwise" here and are left out of flip_table; compare --format json (or
Library.compare) has their semantic drift rate.

An SQLite store is opened read-only (immutable when it has no -wal file, as
the C reader does) and checked first: DriftBench's application_id, a schema
version this package reads (schema.py), and no object the DriftBench schema
does not have (a view or trigger would run code of the file's author).
"""

import os
import sqlite3
import urllib.parse

import pandas as pd

from .schema import STORE_APPLICATION_ID, SchemaError, check_store_version

LABEL_ERROR = -1
LABEL_FAIL = 0
LABEL_PASS = 1

# The objects of DriftBench's SQLite schema (src/store/store_sqlite.c), by version.
_SQLITE_OBJECTS = {
    ("table", "prompts"), ("table", "runs"), ("table", "responses"), ("table", "scores"),
    ("table", "embeddings"), ("table", "run_locks"), ("table", "run_endpoints"),
    ("index", "responses_scan"), ("index", "scores_latest"), ("index", "run_endpoints_run"),
}
_PAIRWISE = {"chat"}


def open_store(where):
    """A Store over an SQLite file path or a PostgreSQL URL."""
    w = os.fspath(where)
    if w.startswith(("postgresql://", "postgres://")):
        return Store(_pg_connect(w), "pg", _redact(w))
    return Store(_sqlite_connect(w), "sqlite", w)


def _redact(url):
    p = urllib.parse.urlsplit(url)
    if p.password is None:
        return url
    netloc = p.netloc.replace(":" + p.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit(p._replace(netloc=netloc))


def _sqlite_connect(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such store file")
    mode = "mode=ro" if os.path.exists(path + "-wal") else "immutable=1"
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?" + mode
    try:
        db = sqlite3.connect(uri, uri=True)
        app = db.execute("PRAGMA application_id").fetchone()[0]
        ver = db.execute("PRAGMA user_version").fetchone()[0]
        objs = db.execute("SELECT type, name FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as e:
        raise SchemaError(f"{path}: not a DriftBench store ({e})") from None
    if app != STORE_APPLICATION_ID:
        db.close()
        raise SchemaError(f"{path}: not a DriftBench store (SQLite application_id {app:#x}, not {STORE_APPLICATION_ID:#x})")
    check_store_version(ver, path)
    for typ, name in objs:
        if (typ, name) not in _SQLITE_OBJECTS and not (typ == "index" and name.startswith("sqlite_autoindex_")):
            db.close()
            raise SchemaError(f"{path}: refused: {typ} '{name}' is not part of DriftBench's store schema")
    return _SqliteConn(db, ver)


def _pg_connect(url):
    try:
        import psycopg2  # Debian: python3-psycopg2
    except ImportError:
        raise ImportError("reading a PostgreSQL store needs psycopg2 (Debian: apt install python3-psycopg2)") from None
    db = psycopg2.connect(url)
    db.set_session(readonly=True, autocommit=True)
    cur = db.cursor()
    cur.execute("SELECT to_regclass('driftbench_meta') IS NOT NULL")
    if not cur.fetchone()[0]:
        raise SchemaError(f"{_redact(url)}: not a DriftBench store (no driftbench_meta table)")
    cur.execute("SELECT value FROM driftbench_meta WHERE key = 'schema_version'")
    row = cur.fetchone()
    ver = int(row[0]) if row else None
    check_store_version(ver, _redact(url))
    return _PgConn(db, ver)


class _SqliteConn:
    """sqlite3's connection and the store's schema version."""

    def __init__(self, db, version):
        self.db, self.version = db, version

    def execute(self, sql, params=()):
        return self.db.execute(sql, params)

    def close(self):
        self.db.close()


class _PgConn:
    """psycopg2's connection under the one method Store uses."""

    def __init__(self, db, version):
        self.db, self.version = db, version

    def execute(self, sql, params=()):
        cur = self.db.cursor()
        cur.execute(sql.replace("?", "%s"), params)
        return cur

    def close(self):
        self.db.close()


class Store:
    """A read-only DriftBench store. Use open_store()."""

    def __init__(self, conn, kind, where):
        self._db, self.kind, self.where = conn, kind, where
        self.schema_version = conn.version

    def close(self):
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _frame(self, sql, params=()):
        cur = self._db.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return pd.DataFrame.from_records(cur.fetchall(), columns=cols)

    def _run_id(self, label):
        row = self._db.execute("SELECT id FROM runs WHERE label = ?", (label,)).fetchone()
        if row is None:
            raise KeyError(f"{self.where}: no run labelled '{label}'")
        return row[0]

    def runs(self):
        """One row per run: run_id, label, target, config, decoding, templates,
        suites (JSON text as stored), tool_version, started_at, finished_at."""
        return self._frame(
            "SELECT id AS run_id, label, target, config, decoding, templates, suites, tool_version, "
            "started_at, finished_at FROM runs ORDER BY id"
        )

    def answers(self, run=None, text=True):
        """One row per answer (response) of run `run` (a label) or of every run.
        text=False leaves the answer text out (a smaller frame)."""
        cols = ("r.id AS response_id, u.label AS run, p.suite, p.prompt_id, p.workload, r.prompt_rowid, "
                "r.replicate, r.failed, r.error, r.http_status, r.attempts, r.prompt_tokens, r.completion_tokens, "
                "r.latency_ms, r.finish_reason, r.created_at" + (", r.text" if text else ""))
        sql = (f"SELECT {cols} FROM responses r JOIN runs u ON u.id = r.run_id "
               "JOIN prompts p ON p.id = r.prompt_rowid")
        params = ()
        if run is not None:
            sql += " WHERE r.run_id = ?"
            params = (self._run_id(run),)
        df = self._frame(sql + " ORDER BY r.run_id, r.prompt_rowid, r.replicate", params)
        df["failed"] = df["failed"].astype(bool)
        return df

    def scores(self, run=None, evaluator=None, latest=True):
        """The scores of run `run`'s answers (or every run's): response_id, run,
        prompt_id, workload, replicate, evaluator, label (1 pass, 0 fail, -1
        evaluator error), value, detail. latest=True: one row per answer, its
        latest score (of `evaluator` when given), as compare reads them."""
        sql = ("SELECT s.id AS score_id, s.response_id, u.label AS run, p.prompt_id, p.workload, r.replicate, "
               "s.evaluator, s.label, s.value, s.detail FROM scores s JOIN responses r ON r.id = s.response_id "
               "JOIN runs u ON u.id = r.run_id JOIN prompts p ON p.id = r.prompt_rowid")
        where, params = [], []
        if run is not None:
            where.append("r.run_id = ?")
            params.append(self._run_id(run))
        if evaluator is not None:
            where.append("s.evaluator = ?")
            params.append(evaluator)
        if where:
            sql += " WHERE " + " AND ".join(where)
        df = self._frame(sql + " ORDER BY s.response_id, s.id", tuple(params))
        if latest:
            df = df.drop_duplicates("response_id", keep="last")
        return df.drop(columns="score_id").reset_index(drop=True)

    def _side(self, label, evaluator):
        a = self.answers(label, text=False)[["response_id", "suite", "prompt_id", "workload", "prompt_rowid",
                                             "replicate", "failed"]]
        s = self.scores(label, evaluator)[["response_id", "label"]]
        return a.merge(s, on="response_id", how="left")

    def pairs(self, baseline, target, evaluator=None):
        """The answers of runs `baseline` and `target` paired by prompt and
        replicate: suite, prompt_id, workload, replicate, baseline_label,
        target_label (NaN: unscored), baseline_failed, target_failed, bucket
        ('counted', 'errors', 'unscored', 'pairwise'), flipped, direction
        ('pass_to_fail', 'fail_to_pass' or None)."""
        b = self._side(baseline, evaluator)
        t = self._side(target, evaluator)
        p = b.merge(t[["prompt_rowid", "replicate", "response_id", "label", "failed"]],
                    on=["prompt_rowid", "replicate"], suffixes=("_b", "_t"))
        out = pd.DataFrame({
            "suite": p["suite"], "prompt_id": p["prompt_id"], "workload": p["workload"],
            "replicate": p["replicate"], "baseline_response": p["response_id_b"],
            "target_response": p["response_id_t"], "baseline_label": p["label_b"], "target_label": p["label_t"],
            "baseline_failed": p["failed_b"], "target_failed": p["failed_t"],
        })
        err = out.baseline_failed | out.target_failed | (out.baseline_label == LABEL_ERROR) | \
            (out.target_label == LABEL_ERROR)
        unscored = ~out.baseline_label.isin([LABEL_PASS, LABEL_FAIL]) | ~out.target_label.isin([LABEL_PASS, LABEL_FAIL])
        pairwise = out.workload.isin(_PAIRWISE)
        bucket = pd.Series("counted", index=out.index)
        bucket[unscored] = "unscored"
        bucket[err] = "errors"
        bucket[pairwise] = "pairwise"
        out["bucket"] = bucket
        out["flipped"] = (bucket == "counted") & (out.baseline_label != out.target_label)
        out["direction"] = None
        out.loc[out.flipped & (out.baseline_label == LABEL_PASS), "direction"] = "pass_to_fail"
        out.loc[out.flipped & (out.baseline_label == LABEL_FAIL), "direction"] = "fail_to_pass"
        return out.reset_index(drop=True)

    def flip_table(self, baseline, target, evaluator=None):
        """Per workload (chat left out, see the module's note): n (counted
        pairs), flips, flip_rate (NaN when n is 0), pass_to_fail, fail_to_pass,
        errors, unscored, baseline_accuracy, target_accuracy."""
        p = self.pairs(baseline, target, evaluator)
        p = p[p.bucket != "pairwise"]
        rows = []
        for wl, g in p.groupby("workload", sort=False):
            c = g[g.bucket == "counted"]
            n = len(c)
            flips = int(c.flipped.sum())
            rows.append({
                "workload": wl, "n": n, "flips": flips, "flip_rate": flips / n if n else float("nan"),
                "pass_to_fail": int((c.direction == "pass_to_fail").sum()),
                "fail_to_pass": int((c.direction == "fail_to_pass").sum()),
                "errors": int((g.bucket == "errors").sum()), "unscored": int((g.bucket == "unscored").sum()),
                "baseline_accuracy": float((c.baseline_label == LABEL_PASS).mean()) if n else float("nan"),
                "target_accuracy": float((c.target_label == LABEL_PASS).mean()) if n else float("nan"),
            })
        return pd.DataFrame(rows, columns=["workload", "n", "flips", "flip_rate", "pass_to_fail", "fail_to_pass",
                                           "errors", "unscored", "baseline_accuracy", "target_accuracy"])
