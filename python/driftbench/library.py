"""libdriftbench through ctypes: compare and the gate with the C library's
own code, so the numbers are the CLI's (docs/python.md).

Library(path=None) loads libdriftbench.so from, in order:
  1. `path`, or the DRIFTBENCH_LIB environment variable (a file path);
  2. a build directory: DRIFT_BUILD's libdriftbench.so, then ../build/ of
     this package's source tree (a checkout used without installing);
  3. the system's library path (ldconfig: libdriftbench.so.0, as the
     libdriftbench0 package or `make install` + ldconfig puts it).
It checks that the library writes the JSON schema version this package
reads (schema.py).

  compare(store, baseline, target, budgets=None)
      drift_comparison_load + drift_comparison_render (JSON), the same as
      `driftbench compare --db STORE --baseline B --target T [--budget S]
      --format json`, parsed into a dict (read_compare() takes it).
  gate(flips, n, left_out, budget, rule="interval", max_left_out=0.05)
      drift_gate_decide: one workload's decision from its counts, a dict
      with verdict (compare's JSON names), reason, ci95 (the exact interval
      the rule reads), more_pairs.
  exit_code(verdict)
      drift_decision_exit_code: what compare exits with for a verdict.
"""

import ctypes
import ctypes.util
import json
import os

from .schema import JSON_SCHEMA_VERSION, SchemaError

_ERROR_MSG_MAX = 1024  # DRIFT_ERROR_MSG_MAX, include/driftbench/status.h
_FORMAT_JSON = 1  # DRIFT_FORMAT_JSON, include/driftbench/report.h
_WL_COUNT_ROOM = 64  # drift_comparison_details holds a pointer and a size_t per workload (5 now)
_VERDICTS = ["not_gated", "deploy", "block", "inconclusive", "error"]  # drift_decision, JSON names
_REASONS = ["none", "rate", "left_out", "unscored", "errors", "no_embedder", "errors_and_unscored"]
_RULES = {"interval": 0, "point": 1}


class DriftError(RuntimeError):
    """An error the library returned (its drift_status code and message)."""

    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * _ERROR_MSG_MAX)]


def _candidates(path):
    if path:
        return [path]
    env = os.environ.get("DRIFTBENCH_LIB")
    if env:
        return [env]
    out = []
    build = os.environ.get("DRIFT_BUILD")
    if build:
        out.append(os.path.join(build, "libdriftbench.so"))
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.normpath(os.path.join(here, "..", "..", "build", "libdriftbench.so")))
    found = ctypes.util.find_library("driftbench")
    out.append(found or "libdriftbench.so.0")
    return out


def _load(path):
    tried = []
    for c in _candidates(path):
        if os.sep in c and not os.path.exists(c):
            tried.append(f"{c} (no such file)")
            continue
        try:
            return ctypes.CDLL(c), c
        except OSError as e:
            tried.append(f"{c} ({e})")
    raise OSError("libdriftbench not found; set DRIFTBENCH_LIB to libdriftbench.so. Tried: " + "; ".join(tried))


class Library:
    def __init__(self, path=None):
        self.lib, self.path = _load(path)
        L = self.lib
        P, I, D, L_, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_long, ctypes.c_char_p
        E = ctypes.POINTER(_Error)
        sig = {
            "drift_json_schema_version": (I, []),
            "drift_store_open_readonly": (I, [S, ctypes.POINTER(P), E]),
            "drift_store_close": (None, [P]),
            "drift_compare_opts_size": (ctypes.c_size_t, []),
            "drift_compare_opts_default": (None, [P]),
            "drift_compare_parse_budgets": (I, [P, S, E]),
            "drift_comparison_load": (I, [P, S, S, P, I, ctypes.POINTER(P), P, E]),
            "drift_comparison_render": (I, [P, P, I, ctypes.POINTER(P), E]),
            "drift_comparison_details_clear": (None, [P]),
            "drift_comparison_free": (None, [P]),
            "drift_gate_decide": (I, [L_, L_, L_, D, I, D, ctypes.POINTER(D), ctypes.POINTER(D),
                                      ctypes.POINTER(L_), ctypes.POINTER(I)]),
            "drift_decision_exit_code": (I, [I]),
        }
        for name, (res, args) in sig.items():
            try:
                f = getattr(L, name)
            except AttributeError:
                raise OSError(f"{self.path}: no {name}: a libdriftbench older than this package") from None
            f.restype, f.argtypes = res, args
        v = L.drift_json_schema_version()
        if v != JSON_SCHEMA_VERSION:
            raise SchemaError(f"{self.path} writes JSON schema version {v}; this package reads {JSON_SCHEMA_VERSION}")
        self.json_schema_version = v
        self._free = ctypes.CDLL(None).free
        self._free.argtypes, self._free.restype = [ctypes.c_void_p], None

    def _check(self, rc, err):
        if rc:
            raise DriftError(rc, err.msg.decode("utf-8", "replace"))

    def compare(self, store, baseline, target, budgets=None):
        """`driftbench compare --format json` of runs baseline and target in
        store (an SQLite path or PostgreSQL URL), parsed. budgets: compare's
        --budget spec ("math=1,safety=0.5%,code=none")."""
        L, err = self.lib, _Error()
        st = ctypes.c_void_p()
        self._check(L.drift_store_open_readonly(os.fsencode(store), ctypes.byref(st), ctypes.byref(err)), err)
        c = ctypes.c_void_p()
        details = ctypes.create_string_buffer(_WL_COUNT_ROOM * 16)  # zeroed, as the API asks
        out = ctypes.c_void_p()
        try:
            opts = ctypes.create_string_buffer(L.drift_compare_opts_size())
            L.drift_compare_opts_default(opts)
            if budgets is not None:
                self._check(L.drift_compare_parse_budgets(opts, budgets.encode(), ctypes.byref(err)), err)
            self._check(L.drift_comparison_load(st, baseline.encode(), target.encode(), opts, _FORMAT_JSON,
                                                ctypes.byref(c), details, ctypes.byref(err)), err)
            self._check(L.drift_comparison_render(c, details, _FORMAT_JSON, ctypes.byref(out), ctypes.byref(err)), err)
            return json.loads(ctypes.string_at(out.value).decode("utf-8"))
        finally:
            if out.value:
                self._free(out)
            L.drift_comparison_details_clear(details)
            if c.value:
                L.drift_comparison_free(c)
            L.drift_store_close(st)

    def gate(self, flips, n, left_out, budget, rule="interval", max_left_out=0.05):
        """The gate's decision for one workload (drift_gate_decide): flips of n
        counted pairs, left_out pairs (errors + unscored), budget a fraction
        (None: not gated)."""
        if rule not in _RULES:
            raise ValueError(f"rule: interval or point, not {rule!r}")
        lo, hi, more, reason = ctypes.c_double(), ctypes.c_double(), ctypes.c_long(), ctypes.c_int()
        d = self.lib.drift_gate_decide(int(flips), int(n), int(left_out), -1.0 if budget is None else float(budget),
                                       _RULES[rule], float(max_left_out), ctypes.byref(lo), ctypes.byref(hi),
                                       ctypes.byref(more), ctypes.byref(reason))
        return {"verdict": _VERDICTS[d], "reason": _REASONS[reason.value], "ci95": (lo.value, hi.value),
                "more_pairs": more.value}

    def exit_code(self, verdict):
        """The exit code compare gives a verdict ("deploy", "block", ...)."""
        return self.lib.drift_decision_exit_code(_VERDICTS.index(verdict))
