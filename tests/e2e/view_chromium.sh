#!/usr/bin/env bash
# view_chromium.sh - the page of `driftbench view` as a browser runs it:
# headless Chromium (Debian's chromium) loads it with a state in the URL's
# hash and dumps the DOM after the page's own script ran (--dump-dom;
# <body data-ready="1"> when a view is complete). Over a store of two
# embedded runs of the shipped qwen2-7m model (ref with logprobs, cpu-int4
# under a label with markup in it) and a third of the same stack:
#   - the pair list holds every pair; a workload filter, flipped only and a
#     text search narrow it to the API's counts (compare's, for flips), and
#     every row shown is of the filter;
#   - a flipped pair's two answers render side by side with a word diff:
#     <del> words on the baseline's side, <ins> on the target's, the
#     baseline's text whole;
#   - a stored answer holding <script> and <img onerror> (written into the
#     store after scoring) shows as text: no script but the page's own
#     runs, no image element appears, the title is unchanged;
#   - a run's history lists the same stack under its other label.
# Without chromium: exit 77 (skipped), saying so.
. "$(dirname "$0")/lib.sh"
command -v chromium >/dev/null 2>&1 || skip_all "chromium not installed (Debian package chromium; scripts/install-deps.sh)"
M=$S/models/qwen2-7m.gguf
DB=$T/v.db
R=(--suite builtin:math --suite builtin:safety --limit 12 --max-tokens 32 --concurrency 1)
"$D" -q run --db "$DB" --label ref --target "embedded:$M?profile=ref&threads=1" "${R[@]}" --logprobs 5 || fail "run ref"
"$D" -q run --db "$DB" --label 'int4<x>' --target "embedded:$M?profile=cpu-int4&threads=1" "${R[@]}" || fail "run int4"
"$D" -q run --db "$DB" --label ref-again --target "embedded:$M?profile=ref&threads=1" --suite builtin:math \
    --limit 4 --max-tokens 32 --concurrency 1 --logprobs 5 || fail "run ref-again"
"$D" -q score --db "$DB" --jobs 1 || fail "score"
# hostile text in the baseline answer of the first flipped math pair
"$D" compare --db "$DB" --baseline ref --target 'int4<x>' --budget math=none,safety=none --format json \
    >"$T/cmp.json" || fail "compare"
flip_id=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(next(f["prompt_id"] for w in d["workloads"] for f in w["flipped"] if w["workload"]=="math"))' "$T/cmp.json") ||
    fail "the fixture has no math flip"
sqlite3 "$DB" "UPDATE responses SET text = text || ' <script>document.title=\"pwned\"</script><img src=x onerror=\"document.title=1\">'
  WHERE id = (SELECT r.id FROM responses r JOIN prompts p ON p.id = r.prompt_rowid JOIN runs u ON u.id = r.run_id
              WHERE u.label = 'ref' AND p.prompt_id = '$flip_id')" || fail "sqlite3 update"

"$D" view --db "$DB" --port 0 >"$T/out" 2>"$T/err" &
VPID=$!
PIDS+=("$VPID")
wait_port_file "$T/out" 200 || { cat "$T/err"; fail "no PORT line"; }

python3 - "$PORT" "$flip_id" "$T" <<'EOF'
import html.parser, json, os, subprocess, sys, tempfile, urllib.parse, urllib.request
port, flip_id, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
base = f"http://127.0.0.1:{port}/"
fails, passes = [], 0
def check(cond, msg):
    global passes
    if cond: passes += 1
    else: fails.append(msg); print("FAIL:", msg, flush=True)

def api(path, **params):
    with urllib.request.urlopen(base + path.lstrip("/") + "?" + urllib.parse.urlencode(params), timeout=60) as r:
        return json.load(r)

class Dom(html.parser.HTMLParser):
    """What the checks read of a dumped DOM: text of elements by id, the
    pair rows, <del>/<ins> words, script and img elements, body attributes."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.text, self.rows, self.dels, self.ins = [], {}, [], [], []
        self.scripts, self.imgs, self.body, self.title, self.in_pairs = 0, 0, {}, "", False
        self.cur_row, self.mark = None, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script": self.scripts += 1
        if tag == "img": self.imgs += 1
        if tag == "body": self.body = a
        if tag == "table" and a.get("id") == "pairs": self.in_pairs = True
        if tag == "tr" and self.in_pairs and "data-workload" in a:
            self.cur_row = {"workload": a["data-workload"], "flipped": a.get("data-flipped"), "cells": []}
            self.rows.append(self.cur_row)
        if tag in ("del", "ins"): self.mark = (tag, [])
        if tag in ("br", "meta", "link", "input", "img"): return  # void elements
        self.stack.append((tag, a.get("id")))
    def handle_endtag(self, tag):
        if tag == "table": self.in_pairs = False
        if tag in ("del", "ins") and self.mark:
            (self.dels if tag == "del" else self.ins).append("".join(self.mark[1])); self.mark = None
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag: break
    def handle_data(self, d):
        for _, i in self.stack:
            if i: self.text[i] = self.text.get(i, "") + d
        if self.stack and self.stack[-1][0] == "title": self.title += d
        if self.mark: self.mark[1].append(d)

def page(state):
    prof = tempfile.mkdtemp(dir=tmp)
    url = base + "#" + urllib.parse.urlencode(state)
    out = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          "--user-data-dir=" + prof, "--virtual-time-budget=10000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180)
    d = Dom()
    d.feed(out.stdout)
    check(d.body.get("data-ready") == "1", f"{state}: the page's script finished (body {d.body})")
    check(not d.text.get("error", "").strip(), f"{state}: no error shown: {d.text.get('error')!r}")
    return d

T = "int4<x>"
allp = api("/api/pairs", baseline="ref", target=T, limit=500)
n_all = allp["all"]
check(n_all == 24, f"the API lists 24 pairs ({n_all})")
d = page({"baseline": "ref", "target": T})
check(d.text.get("pair-total") == str(n_all) and d.text.get("pair-all") == str(n_all),
      f"unfiltered: {d.text.get('pair-total')} of {d.text.get('pair-all')}")
check(len(d.rows) == n_all, f"unfiltered: {len(d.rows)} rows")
check(T in d.text.get("pairs-title", ""), "the target's label (with its markup) shows as text in the title")
# a search word: one of a flipped answer's words that some answers hold and others not
pair = next(p for p in allp["pairs"] if p["prompt_id"] == flip_id)
detail = api("/api/pair", baseline="ref", target=T, response=pair["response"])
btext, ttext = detail["baseline_answer"]["text"], detail["target_answer"]["text"]
word, n_word = None, 0
for w in btext.split():
    if len(w) > 3 and "<" not in w:
        n_word = api("/api/pairs", baseline="ref", target=T, q=w.upper())["total"]
        if 0 < n_word < n_all:
            word = w.upper()
            break
check(word is not None, "a search word found")
cmp_flips = sum(w["flips"] for w in json.load(open(os.path.join(tmp, "cmp.json")))["workloads"])
for state, want, row_ok in [
        ({"workload": "math"}, api("/api/pairs", baseline="ref", target=T, workload="math")["total"],
         lambda r: r["workload"] == "math"),
        ({"flipped": "1"}, cmp_flips, lambda r: r["flipped"] == "1"),
        ({"q": word}, n_word, lambda r: True)]:
    s = dict({"baseline": "ref", "target": T}, **state)
    d = page(s)
    got = d.text.get("pair-total")
    check(got == str(want) and 0 < want < n_all, f"{state}: {got} pairs shown, want {want} (of {n_all})")
    check(len(d.rows) == want and all(row_ok(r) for r in d.rows), f"{state}: the rows are the filter's ({len(d.rows)})")
    check(d.text.get("pair-all") == str(n_all), f"{state}: of {n_all}")

# the flipped pair with hostile text: diff rendered, script inert
check("<script>" in btext, "the stored answer holds <script>")
d = page({"baseline": "ref", "target": T, "pair": pair["response"]})
# (a <pre>'s leading newline is dropped when the dumped DOM is parsed again)
check(d.text.get("diff-base", "").lstrip("\n") == btext.lstrip("\n"),
      f"the baseline's text whole, as text: {d.text.get('diff-base')!r}")
check(d.text.get("diff-targ", "").lstrip("\n") == ttext.lstrip("\n"), f"the target's text whole: {d.text.get('diff-targ')!r}")
bw, tw = btext.split(), ttext.split()
check(d.dels and all(w in bw for w in d.dels), f"<del> words of the baseline: {d.dels}")
check(d.ins and all(w in tw for w in d.ins), f"<ins> words of the target: {d.ins}")
check(any("<script>" in w for w in d.dels), f"the hostile words are marked removed, as text: {d.dels}")
check(len(bw) - len(d.dels) == len(tw) - len(d.ins), "both sides keep the same common words")
check(d.scripts == 1 and d.imgs == 0, f"no script but the page's own, no img: {d.scripts} scripts, {d.imgs} img")
check(d.title.strip() == "DriftBench results", f"the title is the page's: {d.title!r}")
check("math" in d.text.get("scores", "") and "expected" in d.text.get("scores", ""), "scores with the evaluator's detail")
check("risk/v" in d.text.get("risk", ""), f"flip risk shown: {d.text.get('risk')!r}")

# history across labels
d = page({"history": "ref"})
hist = d.text.get("history", "")
check("ref-again" in hist and "ref (this run)" in hist, f"history: {hist!r}")
check("embedded:" in d.text.get("endpoints", ""), "history: the endpoint it ran through")

print(f"view_chromium DOM checks: {passes} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
EOF
rc=$?
check '[ $rc -eq 0 ]' "the DOM checks"
kill -INT "$VPID"
wait "$VPID"
check '[ $? -eq 0 ]' "SIGINT stops the view, exit 0"
finish
