"""The installed driftbench package against the CLI (tests/e2e/python_package.sh
makes the store and the CLI's outputs and runs this with):
  DRIFT_PY_STORE    an SQLite store with runs DRIFT_PY_BASE and DRIFT_PY_TARG, scored
  DRIFT_PY_JSON     `driftbench compare --format json` of the two, DRIFT_PY_RC its exit code
  DRIFT_PY_JSON_NONE the same with --budget math=none
  DRIFT_PY_RUNS     `driftbench runs list --json`
  DRIFTBENCH        the CLI (runs show --json and version --format json are asked of it)
  DRIFTBENCH_LIB    the build's libdriftbench.so
  DRIFT_PY_VENV     the virtual environment the package was installed into
tests/e2e/python_postgres.sh runs it again with DRIFT_PY_STORE a PostgreSQL URL
(the package from the tree, no venv): the tests of the SQLite file and of the
install are skipped there.
"""

import json
import math
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

import driftbench as db

E = os.environ
STORE, BASE, TARG = E["DRIFT_PY_STORE"], E["DRIFT_PY_BASE"], E["DRIFT_PY_TARG"]
PG = STORE.startswith(("postgresql://", "postgres://"))


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@unittest.skipUnless(E.get("DRIFT_PY_VENV"), "not installed into a venv here")
class Installed(unittest.TestCase):
    def test_imported_from_the_install(self):
        self.assertTrue(os.path.realpath(db.__file__).startswith(os.path.realpath(E["DRIFT_PY_VENV"])), db.__file__)


class StoreReader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.st = db.open_store(STORE)
        cls.cli = load(E["DRIFT_PY_JSON"])

    @classmethod
    def tearDownClass(cls):
        cls.st.close()

    def test_schema_version_is_the_stores(self):
        if PG:
            import psycopg2
            with psycopg2.connect(STORE) as c, c.cursor() as cur:
                cur.execute("SELECT value FROM driftbench_meta WHERE key = 'schema_version'")
                self.assertEqual(self.st.schema_version, int(cur.fetchone()[0]))
            self.assertEqual(self.st.kind, "pg")
            return
        with sqlite3.connect(STORE) as c:
            self.assertEqual(self.st.schema_version, c.execute("PRAGMA user_version").fetchone()[0])
        self.assertEqual(self.st.schema_version, db.STORE_SCHEMA_VERSION)

    def test_runs_and_answers_match_runs_list(self):
        listed = {r["label"]: r for r in db.read_runs(E["DRIFT_PY_RUNS"]).to_dict("records")}
        self.assertEqual(list(listed), [r["label"] for r in load(E["DRIFT_PY_RUNS"])["runs"]])
        runs = self.st.runs()
        self.assertEqual(set(runs.label), set(listed))
        for label, r in listed.items():
            a = self.st.answers(label)
            self.assertEqual(len(a), r["responses"], label)
            self.assertEqual(int((~a.failed).sum()), r["answers"], label)
            self.assertEqual(len(self.st.scores(label)), r["scored"], label)
        self.assertEqual(len(self.st.answers()), sum(r["responses"] for r in listed.values()))

    def test_flip_table_matches_compare(self):
        ft = self.st.flip_table(BASE, TARG).set_index("workload")
        wls = {w["workload"]: w for w in self.cli["workloads"] if w["workload"] != "chat"}
        self.assertEqual(set(ft.index), set(wls))
        for name, w in wls.items():
            r = ft.loc[name]
            self.assertEqual(r.n, w["n"], name)
            self.assertEqual(r.flips, w["flips"], name)
            self.assertEqual(r.errors, w["errors"], name)
            self.assertEqual(r.unscored, w["unscored"], name)
            self.assertEqual(r.pass_to_fail, w["correct_to_incorrect"], name)
            self.assertEqual(r.fail_to_pass, w["incorrect_to_correct"], name)
            if w["n"]:
                self.assertAlmostEqual(r.flip_rate, w["flip_rate"], places=12)
                self.assertAlmostEqual(r.baseline_accuracy, w["baseline_accuracy"], places=12)
        self.assertGreater(sum(w["n"] for w in wls.values()), 0, "the store holds counted pairs")

    def test_pairs_flipped_are_compares_flips(self):
        p = self.st.pairs(BASE, TARG)
        for w in self.cli["workloads"]:
            if w["workload"] == "chat":
                continue
            mine = sorted(p[(p.workload == w["workload"]) & p.flipped].prompt_id)
            self.assertEqual(mine, sorted(f["prompt_id"] for f in w["flipped"]), w["workload"])

    def test_unknown_run(self):
        with self.assertRaisesRegex(KeyError, "no run labelled 'nope'"):
            self.st.pairs(BASE, "nope")


@unittest.skipIf(PG, "the schema checks' fixtures are SQLite files")
class Schemas(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def copy(self):
        p = os.path.join(self.tmp, "s.db")
        shutil.copy(STORE, p)
        return p

    def test_newer_store_refused(self):
        p = self.copy()
        with sqlite3.connect(p) as c:
            c.execute(f"PRAGMA user_version = {db.STORE_SCHEMA_VERSION + 1}")
        with self.assertRaisesRegex(db.SchemaError, f"store schema version {db.STORE_SCHEMA_VERSION + 1} is newer"):
            db.open_store(p)

    def test_foreign_sqlite_refused(self):
        p = os.path.join(self.tmp, "other.db")
        with sqlite3.connect(p) as c:
            c.execute("CREATE TABLE t(x)")
        with self.assertRaisesRegex(db.SchemaError, "not a DriftBench store"):
            db.open_store(p)

    def test_view_refused(self):
        p = self.copy()
        with sqlite3.connect(p) as c:
            c.execute("CREATE VIEW v AS SELECT 1")
        with self.assertRaisesRegex(db.SchemaError, "view 'v' is not part"):
            db.open_store(p)

    def test_json_versions(self):
        doc = load(E["DRIFT_PY_JSON"])
        self.assertEqual(next(iter(doc)), "schema_version")
        self.assertEqual(doc["schema_version"], db.JSON_SCHEMA_VERSION)
        old = dict(doc)
        del old["schema_version"]
        with self.assertRaisesRegex(db.SchemaError, "no \"schema_version\""):
            db.read_compare(old)
        with self.assertRaisesRegex(db.SchemaError, "JSON schema version 99"):
            db.read_compare({**doc, "schema_version": 99})

    def test_runs_list_version(self):
        doc = load(E["DRIFT_PY_RUNS"])
        self.assertEqual(list(doc), ["schema_version", "runs"])
        self.assertEqual(doc["schema_version"], db.JSON_SCHEMA_VERSION)
        with self.assertRaisesRegex(db.SchemaError, "bare JSON array"):
            db.read_runs(json.dumps(doc["runs"]))
        with self.assertRaisesRegex(db.SchemaError, "JSON schema version 2"):
            db.read_runs({**doc, "schema_version": 2})
        with self.assertRaisesRegex(ValueError, "no 'runs'"):
            db.read_runs({"schema_version": db.JSON_SCHEMA_VERSION})


def cli(*args):
    return subprocess.run([E["DRIFTBENCH"], *args], check=True, capture_output=True, text=True).stdout


@unittest.skipUnless(E.get("DRIFTBENCH"), "no DRIFTBENCH (the CLI)")
class CliDocuments(unittest.TestCase):
    def test_runs_show(self):
        text = cli("runs", "show", TARG, "--db", STORE, "--json")
        doc = json.loads(text)
        self.assertEqual(next(iter(doc)), "schema_version")
        run = db.read_run(text)
        self.assertEqual(run["label"], TARG)
        listed = db.read_runs(E["DRIFT_PY_RUNS"]).set_index("label").loc[TARG]
        self.assertEqual(run["responses"], listed.responses)
        self.assertEqual(sum(w["answers"] + w["failed"] for w in run["workloads"].values()), run["responses"])
        with self.assertRaisesRegex(db.SchemaError, "no \"schema_version\""):
            db.read_run({k: v for k, v in doc.items() if k != "schema_version"})

    def test_version(self):
        text = cli("version", "--format", "json")
        self.assertEqual(next(iter(json.loads(text))), "schema_version")
        v = db.read_version(text)
        self.assertEqual(v["version"], db.__version__)
        self.assertIn("sqlite", v["libraries"])
        self.assertIn("lookup", v["data"])
        with self.assertRaisesRegex(db.SchemaError, "JSON schema version 0"):
            db.read_version({**v, "schema_version": 0})


class CompareJson(unittest.TestCase):
    def test_frames(self):
        doc = load(E["DRIFT_PY_JSON"])
        c = db.read_compare(E["DRIFT_PY_JSON"])
        self.assertEqual(c.verdict, doc["verdict"])
        self.assertEqual(c.exit_code, int(E["DRIFT_PY_RC"]))
        self.assertEqual(list(c.workloads.workload), [w["workload"] for w in doc["workloads"]])
        self.assertEqual(list(c.workloads.flips), [w["flips"] for w in doc["workloads"]])
        self.assertEqual(list(c.workloads.ci95_lo), [w["ci95"][0] for w in doc["workloads"]])
        self.assertEqual(len(c.flips), sum(len(w["flipped"]) for w in doc["workloads"]))
        for w in doc["workloads"]:
            if w["workload"] != "chat":
                self.assertEqual(len(w["flipped"]), w["flips"], w["workload"])
        with open(E["DRIFT_PY_JSON"], encoding="utf-8") as f:
            self.assertEqual(db.read_compare(f.read()).doc, doc)


class LibraryCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = db.Library()

    def test_found_through_env(self):
        self.assertEqual(self.lib.path, E["DRIFTBENCH_LIB"])
        self.assertEqual(self.lib.json_schema_version, db.JSON_SCHEMA_VERSION)

    def test_compare_is_the_clis(self):
        self.assertEqual(self.lib.compare(STORE, BASE, TARG), load(E["DRIFT_PY_JSON"]))
        self.assertEqual(self.lib.compare(STORE, BASE, TARG, budgets="math=none"), load(E["DRIFT_PY_JSON_NONE"]))

    def test_gate_is_compares(self):
        doc = load(E["DRIFT_PY_JSON"])
        seen = 0
        for w in doc["workloads"]:
            if not w["n"]:
                continue
            g = self.lib.gate(w["flips"], w["n"], w["errors"] + w["unscored"], w["budget"])
            self.assertEqual(g["verdict"], w["verdict"], w["workload"])
            self.assertEqual(g["reason"], w["decision_reason"], w["workload"])
            for mine, cli in zip(g["ci95"], w["decision_ci95"]):
                self.assertTrue(math.isclose(mine, cli, rel_tol=1e-13, abs_tol=1e-15), (mine, cli))
            seen += 1
        self.assertGreater(seen, 0)
        self.assertEqual(self.lib.exit_code(doc["verdict"]), int(E["DRIFT_PY_RC"]))

    def test_gate_by_hand(self):
        # 0 flips of 1000 under a 2% budget: the exact upper bound 1-0.025^(1/1000) = 0.00368 is within: deploy
        g = self.lib.gate(0, 1000, 0, 0.02)
        self.assertEqual(g["verdict"], "deploy")
        self.assertAlmostEqual(g["ci95"][1], 1 - 0.025 ** (1 / 1000), places=12)
        self.assertEqual(self.lib.gate(50, 100, 0, 0.02)["verdict"], "block")
        self.assertEqual(self.lib.gate(1, 20, 0, 0.02)["verdict"], "inconclusive")
        self.assertEqual(self.lib.gate(0, 100, 10, 0.02)["reason"], "left_out")
        self.assertEqual(self.lib.gate(3, 100, 0, None)["verdict"], "not_gated")
        self.assertEqual([self.lib.exit_code(v) for v in ("deploy", "block", "error", "inconclusive")], [0, 1, 2, 3])

    def test_errors(self):
        with self.assertRaisesRegex(db.DriftError, "nope"):
            self.lib.compare(STORE, BASE, "nope")
        with self.assertRaisesRegex(db.DriftError, "bogus"):
            self.lib.compare(STORE, BASE, TARG, budgets="bogus=1")
        with self.assertRaisesRegex(OSError, "libdriftbench not found"):
            db.Library("/nonexistent/libdriftbench.so")


if __name__ == "__main__":
    unittest.main()
