"""divergence_checks.py - the checks of `driftbench divergence` JSON that
tests/e2e/divergence_http.sh, divergence_http_chat.sh and request_control.sh
share, written once. Each verb exits 0 when its check holds; otherwise an
AssertionError names what differed (exit 1). lib.sh runs it as
`divergence_check VERB ARGS...`.

  same-zero DIV [API]          the same profile over HTTP and embedded: method
                               top-K (prompt_logprobs), K = 20, 4 prompts, none
                               skipped, 96 positions, exactly 0 KL, every top-1
                               the same, every answer token (24) paired; API,
                               when given, is the JSON's "api"
  tolerance EMB HTTP MIN LABEL the HTTP pair (top-20) against the embedded pair
                               (full logits) over 96 positions: mean KL above
                               MIN, a lower bound of the full KL and at least
                               90% of it, its max no larger, the perplexities
                               and dp to 1e-9, the top-1 agreement to one
                               position; prints LABEL with both KLs
  mixed HTTP MIX...            each mixed pair (embedded against HTTP) gives
                               the HTTP pair's figures exactly (1e-12)
  compare-kl CMP HTTP          compare --kl's JSON names the method (K = 20)
                               and has the HTTP pair's mean KL
  report-kl HTML LABEL=DIV...  report --kl's page draws exactly these
                               configurations, none left out, each with the
                               mean KL of its divergence JSON DIV as the page
                               prints it (%.3e); DIV "0": exactly 0
  stored-logprobs DB LABEL     prints (JSON) the logprob of every answer token
                               the run LABEL stored (zstd frames of JSON, read
                               with libzstd)
  forced-ppl DIV LPS           the run's answers forced give back the stored
                               logprobs LPS (a stored-logprobs file): as many
                               positions, the perplexity to 1e-9
"""
import ctypes
import ctypes.util
import json
import math
import re
import sqlite3
import sys

TOPK = "top-K (prompt_logprobs)"


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def same_zero(path, api=None):
    d = load(path)
    o = d["overall"]
    if api is not None:
        assert d["api"] == api, d["api"]
    assert d["method"] == TOPK and d["top_k"] == 20, (d["method"], d["top_k"])
    assert d["prompts_total"] == 4 and d["skipped"] == 0, d
    assert o["positions"] == 96 and o["kl_mean"] == 0 and o["kl_max"] == 0 and o["same_top"] == 1, o
    assert all(p["unaligned"] == 0 and p["answer_tokens"] == 24 for p in d["prompts"]), d["prompts"]


def tolerance(emb, http, min_kl, label):
    e, h = load(emb), load(http)
    eo, ho = e["overall"], h["overall"]
    assert e["method"] == "logits" and h["method"] == TOPK, (e["method"], h["method"])
    assert eo["positions"] == ho["positions"] == 96, (eo["positions"], ho["positions"])
    assert ho["kl_mean"] > float(min_kl), ho
    # the stated tolerance: a lower bound, and within 10% of the full KL (top-20 truncation)
    assert ho["kl_mean"] <= eo["kl_mean"] * (1 + 1e-9) and ho["kl_mean"] >= 0.9 * eo["kl_mean"], \
        (ho["kl_mean"], eo["kl_mean"])
    assert ho["kl_max"] <= eo["kl_max"] * (1 + 1e-9), (ho["kl_max"], eo["kl_max"])
    for k in ("ppl_base", "ppl_target", "dp_mean", "dp_p01", "dp_p50", "dp_p99"):
        assert abs(ho[k] - eo[k]) <= 1e-9 * (1 + abs(eo[k])), (k, ho[k], eo[k])
    assert abs(ho["same_top"] - eo["same_top"]) <= 1 / 96 + 1e-12, (ho["same_top"], eo["same_top"])
    print("%s: mean KL embedded %.6g, HTTP top-20 %.6g (%.1f%%)"
          % (label, eo["kl_mean"], ho["kl_mean"], 100 * ho["kl_mean"] / eo["kl_mean"]))


def mixed(http, *mixes):
    h = load(http)["overall"]
    for f in mixes:
        d = load(f)
        o = d["overall"]
        assert d["method"] == TOPK, d["method"]
        for k in ("positions", "kl_mean", "kl_max", "same_top", "dp_p50", "ppl_target"):
            assert abs(o[k] - h[k]) <= 1e-12 * (1 + abs(h[k])), (f, k, o[k], h[k])


def compare_kl(cmp, http):
    k = load(cmp)["token_kl"]
    h = load(http)["overall"]
    assert k["method"] == TOPK and k["top_k"] == 20, k
    assert abs(k["overall"]["kl_mean"] - h["kl_mean"]) <= 1e-12, (k["overall"], h)


def report_kl(html, *pairs):
    h = open(html).read()
    rows = dict(re.findall(r'<tr><td>([^<]+)</td><td class="num">([-+.e0-9]+)</td>', h))
    want = {}
    for p in pairs:
        label, div = p.split("=", 1)
        want[label] = 0.0 if div == "0" else load(div)["overall"]["kl_mean"]
    assert sorted(rows) == sorted(want), (rows, sorted(want))
    for k, v in want.items():
        assert rows[k] == "%.3e" % v, (k, rows[k], v)
    assert "Not drawn" not in h, re.findall(r"Not drawn[^<]*", h)
    print("report --kl: " + ", ".join("%s %s" % kv for kv in sorted(rows.items())))


def stored_logprobs(db, label):
    z = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    z.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    z.ZSTD_decompress.restype = ctypes.c_size_t
    out = []
    q = "SELECT r.logprobs FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label = ?"
    for (blob,) in sqlite3.connect(db).execute(q, (label,)):
        n = z.ZSTD_getFrameContentSize(blob, ctypes.c_size_t(len(blob)))
        buf = ctypes.create_string_buffer(n)
        assert z.ZSTD_decompress(buf, ctypes.c_size_t(n), blob, ctypes.c_size_t(len(blob))) == n
        out += [t["logprob"] for t in json.loads(buf.raw.decode("utf-8", "replace"))]
    print(json.dumps(out))


def forced_ppl(div, lps_path):
    o = load(div)["overall"]
    lps = load(lps_path)
    want = math.exp(-sum(lps) / len(lps))
    assert o["positions"] == len(lps) and abs(o["ppl_base"] - want) <= 1e-9 * want, (o, len(lps), want)
    print("forced perplexity %.9f = the stored %.9f" % (o["ppl_base"], want))


VERBS = {"same-zero": (same_zero, 1, 2), "tolerance": (tolerance, 4, 4), "mixed": (mixed, 2, None),
         "compare-kl": (compare_kl, 2, 2), "report-kl": (report_kl, 2, None),
         "stored-logprobs": (stored_logprobs, 2, 2),
         "forced-ppl": (forced_ppl, 2, 2)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in VERBS:
        sys.exit("usage: divergence_checks.py {%s} ARGS..." % ",".join(VERBS))
    fn, lo, hi = VERBS[sys.argv[1]]
    args = sys.argv[2:]
    if len(args) < lo or (hi is not None and len(args) > hi):
        want = str(lo) if hi == lo else "%d or more" % lo if hi is None else "%d to %d" % (lo, hi)
        sys.exit("divergence_checks.py %s: %d arguments, want %s" % (sys.argv[1], len(args), want))
    fn(*args)
