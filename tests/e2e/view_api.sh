#!/usr/bin/env bash
# view_api.sh - `driftbench view` over HTTP: a store of three embedded runs
# of the shipped qwen2-7m model (ref with logprobs; cpu-int4; ref again under
# another label), scored; the view's JSON API is checked against compare's
# own JSON (flips and directions per workload), the stored texts and
# scores, and against itself (filters narrow, pages add up to the whole
# list); bad parameters are 400, unknown labels, pairs and paths 404, a
# foreign Host header 403 (DNS rebinding), POST 405, a body 413; every reply
# carries the CSP; the store's bytes are unchanged and no -wal/-shm appears
# (read-only); SIGINT stops it with exit 0; a bad store is exit 2 naming it;
# --host 0.0.0.0 warns; --open without a display (xdg-open failing, missing,
# or never returning) prints the URL, serves, says the opener failed with the
# URL, and SIGTERM still stops it with exit 0.
. "$(dirname "$0")/lib.sh"
M=$S/models/qwen2-7m.gguf
DB=$T/v.db
R=(--suite builtin:math --suite builtin:safety --limit 12 --max-tokens 32 --concurrency 1)
"$D" -q run --db "$DB" --label ref --target "embedded:$M?profile=ref&threads=1" "${R[@]}" --logprobs 5 || fail "run ref"
"$D" -q run --db "$DB" --label 'int4<x>' --target "embedded:$M?profile=cpu-int4&threads=1" "${R[@]}" || fail "run int4"
"$D" -q run --db "$DB" --label ref-again --target "embedded:$M?profile=ref&threads=1" "${R[@]}" --logprobs 5 ||
    fail "run ref-again"
"$D" -q score --db "$DB" --jobs 1 || fail "score"
"$D" compare --db "$DB" --baseline ref --target 'int4<x>' --budget math=none,safety=none --format json \
    >"$T/cmp.json" || fail "compare"
before=$(sha256sum "$DB" | cut -d' ' -f1)
wal_before=$(ls "$DB"-wal "$DB"-shm 2>/dev/null)

"$D" view --db "$DB" --port 0 >"$T/out" 2>"$T/err" &
VPID=$!
PIDS+=("$VPID")
wait_port_file "$T/out" 200 || { cat "$T/err"; fail "no PORT line"; }
check 'grep -q "^driftbench view: .*v.db at http://127.0.0.1:$PORT/ (Ctrl-C stops)$" "$T/out"' \
    "the URL is printed: $(head -1 "$T/out")"

exec 3<>"/dev/tcp/127.0.0.1/$PORT" || fail "connect"
printf 'GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n' >&3
slow_since=$(date +%s)
python3 - "$PORT" "$T/cmp.json" "$DB" >"$T/py.out" 2>&1 <<'EOF'
import http.client, json, sqlite3, sys, urllib.parse
port, cmp_path, db = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fails = []
def check(cond, msg):
    if not cond: fails.append(msg)

def get(path, params=None, host=None, method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    url = path + ("?" + urllib.parse.urlencode(params) if params else "")
    headers = {"Host": host} if host else {}
    c.request(method, url, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data

def api(path, **params):
    st, h, data = get(path, params)
    check(st == 200, f"{path} {params}: status {st}: {data[:200]!r}")
    return json.loads(data)

T = "int4<x>"
cmp = json.load(open(cmp_path))
want = {w["workload"]: w for w in cmp["workloads"]}

runs = api("/api/runs")
check([r["label"] for r in runs["runs"]] == ["ref", T, "ref-again"], f"runs: {[r['label'] for r in runs['runs']]}")
check(all(r["responses"] == 24 and r["failed"] == 0 for r in runs["runs"]), "runs: 24 answers each")

cmps = api("/api/comparisons")["comparisons"]
check(len(cmps) == 3, f"comparisons: 3 pairs of runs share prompts, got {len(cmps)}")
c0 = [c for c in cmps if c["baseline"] == "ref" and c["target"] == T]
check(len(c0) == 1, "comparisons: ref -> int4<x> listed")
if c0:
    got = {w["workload"]: w["flips"] for w in c0[0]["workloads"]}
    check(got == {k: v["flips"] for k, v in want.items()}, f"comparisons: flips {got} are compare's")

# every pair of ref -> int4<x>, one page
allp = api("/api/pairs", baseline="ref", target=T, limit=500)
check(allp["all"] == 24 and allp["total"] == 24 and len(allp["pairs"]) == 24, f"pairs: 24 of 24, got {allp['total']}")
flips = sum(v["flips"] for v in want.values())
check(flips > 0, "the fixture has flips (qwen2-7m, int4)")
for wl in ("math", "safety"):
    r = api("/api/pairs", baseline="ref", target=T, workload=wl)
    check(r["total"] == want[wl]["n"] and all(p["workload"] == wl for p in r["pairs"]),
          f"workload={wl}: {r['total']} pairs, compare counted {want[wl]['n']}")
r = api("/api/pairs", baseline="ref", target=T, flipped=1)
check(r["total"] == flips and all(p["flipped"] for p in r["pairs"]), f"flipped=1: {r['total']}, compare {flips}")
flip_ids = sorted(f["prompt_id"] for v in want.values() for f in v["flipped"])
check(sorted(p["prompt_id"] for p in r["pairs"]) == flip_ids, "flipped=1: compare's flipped prompts")
for d in ("correct_to_incorrect", "incorrect_to_correct"):
    r = api("/api/pairs", baseline="ref", target=T, direction=d)
    check(r["total"] == want["math"][d] and all(p["direction"] == d for p in r["pairs"]),
          f"direction={d}: {r['total']}, compare {want['math'][d]}")
# text search: a word of one flipped answer finds it, case-insensitively, and fewer than all
flip = next(p for p in allp["pairs"] if p["flipped"])
con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)  # immutable: no -wal/-shm of its own
base_text = con.execute("SELECT text FROM responses WHERE id=?", (flip["response"],)).fetchone()[0]
targ_text = con.execute("SELECT text FROM responses WHERE id=?", (flip["target_response"],)).fetchone()[0]
words = [w for w in base_text.split() if len(w) > 3]
r = api("/api/pairs", baseline="ref", target=T, q=words[0].upper())
check(0 < r["total"] < 24 and any(p["response"] == flip["response"] for p in r["pairs"]),
      f"q={words[0].upper()!r}: {r['total']} pairs")
r = api("/api/pairs", baseline="ref", target=T, q="no answer says this 9f3c")
check(r["total"] == 0 and r["all"] == 24, "q: no match, 0 of 24")
# configuration of the target run; target left out spans every other run
r = api("/api/pairs", baseline="ref", config="precision=int4")
check(r["total"] == 24 and {p["target"] for p in r["pairs"]} == {T}, f"config=precision=int4: {r['total']}")
r = api("/api/pairs", baseline="ref", config="precision=f32")
check(r["total"] == 24 and {p["target"] for p in r["pairs"]} == {"ref-again"}, f"config=precision=f32: {r['total']}")
r = api("/api/pairs", baseline="ref", limit=500)
check(r["total"] == 48 and len(r["comparisons"]) == 2, f"every other run: 48 pairs, got {r['total']}")
# pages add up to the whole list
seen = []
for off in range(0, 24, 7):
    seen += [p["response"] for p in api("/api/pairs", baseline="ref", target=T, limit=7, offset=off)["pairs"]]
check(seen == [p["response"] for p in allp["pairs"]], "pages of 7 add up to the list, in order, once each")
check(api("/api/pairs", baseline="ref", target=T, offset=100)["pairs"] == [], "offset past the end: empty page")

# one pair: both stored texts, scores with details, flip risk from logprobs
d = api("/api/pair", baseline="ref", target=T, response=flip["response"])
check(d["baseline_answer"]["text"] == base_text and d["target_answer"]["text"] == targ_text, "pair: the stored texts")
bs = d["baseline_answer"]["scores"]
check(len(bs) >= 1 and bs[0]["latest"] and isinstance(bs[0]["detail"], dict), f"pair: scores with details {bs}")
if flip["workload"] == "math":
    check("expected" in bs[0]["detail"], "pair: math detail has the expected answer")
check(d["risk_detail"].get("score") is not None and d["risk_detail"]["tokens"] > 0, f"pair: risk {d['risk_detail']}")
check(abs(d["risk_detail"]["score"] - flip["risk"]) < 1e-9, "pair: the risk is compare's")
check(d["prompt"]["input"], "pair: the prompt's input")

# history: the endpoint and the same stack under another label
h = api("/api/history", label="ref")
check(len(h["endpoint_history"]) == 1 and h["endpoint_history"][0]["begins"] == 1, f"history: {h['endpoint_history']}")
labels = {x["label"]: x for x in h["history"]}
check(set(labels) == {"ref", "ref-again"} and labels["ref-again"]["same_identity"] and labels["ref"]["this"],
      f"history: same stack {sorted(labels)}")

# errors
for path, params, st in [
        ("/api/pairs", {"baseline": "ref", "limit": 0}, 400),
        ("/api/pairs", {"baseline": "ref", "limit": 501}, 400),
        ("/api/pairs", {"baseline": "ref", "offset": -1}, 400),
        ("/api/pairs", {"baseline": "ref", "offset": "1x"}, 400),
        ("/api/pairs", {"baseline": "ref", "flipped": 2}, 400),
        ("/api/pairs", {"baseline": "ref", "workload": "poetry"}, 400),
        ("/api/pairs", {"baseline": "ref", "direction": "up"}, 400),
        ("/api/pairs", {"baseline": "ref", "config": "precision"}, 400),
        ("/api/pairs", {"baseline": "ref", "colour": "red"}, 400),
        ("/api/pairs", {}, 400),
        ("/api/pairs", {"baseline": "ref", "target": "ref"}, 400),
        ("/api/pairs", {"baseline": "nope"}, 404),
        ("/api/pairs", {"baseline": "ref", "target": "nope"}, 404),
        ("/api/pair", {"baseline": "ref", "target": T, "response": 999999}, 404),
        ("/api/pair", {"baseline": "ref", "target": T}, 400),
        ("/api/history", {"label": "nope"}, 404),
        ("/api/history", {}, 400),
        ("/api/nothing", {}, 404),
        ("/nothing.html", {}, 404)]:
    got, h, data = get(path, params)
    check(got == st, f"{path} {params}: {got}, want {st}")
    check(data.startswith(b'{"error":'), f"{path} {params}: a JSON error: {data[:80]!r}")
got, h, data = get("/api/pairs?baseline=ref&baseline=int4")
check(got == 400, f"a parameter twice: {got}")
for host, st in [("evil.example:%d" % port, 403), ("evil.example", 403), ("localhost.evil.example", 403),
                 ("localhost:%d" % port, 200), ("127.0.0.1:%d" % port, 200), ("[::1]:%d" % port, 200)]:
    got, h, _ = get("/api/runs", host=host)
    check(got == st, f"Host {host}: {got}, want {st}")
got, h, _ = get("/api/runs", method="POST", body=b"x")
check(got == 405 and h.get("allow") == "GET, HEAD", f"POST: {got} {h.get('allow')}")
got, h, _ = get("/", method="DELETE")
check(got == 405, f"DELETE: {got}")
got, h, _ = get("/api/runs", method="GET", body=b"x" * 10)
check(got == 413, f"GET with a body: {got}")
# the page and its files, with the security headers
for path, ctype in [("/", "text/html"), ("/view.js", "text/javascript"), ("/view.css", "text/css")]:
    got, h, data = get(path)
    check(got == 200 and h.get("content-type", "").startswith(ctype), f"{path}: {got} {h.get('content-type')}")
    check("script-src 'self'" in h.get("content-security-policy", "") and
          "default-src 'none'" in h.get("content-security-policy", ""), f"{path}: CSP {h.get('content-security-policy')}")
    check(h.get("x-content-type-options") == "nosniff" and h.get("x-frame-options") == "DENY", f"{path}: headers")
got, h, data = get("/")
check(b"http://" not in data and b"https://" not in data, "the page loads nothing from elsewhere")
got, h, data = get("/view.js")
check(b"innerHTML" not in data.replace(b"never innerHTML", b""), "the script never uses innerHTML")
got, h, data = get("/api/runs")
check("default-src 'none'" in h.get("content-security-policy", ""), "API replies carry the CSP too")

for f in fails: print("FAIL:", f)
print("api checks:", "ok" if not fails else f"{len(fails)} failed")
sys.exit(1 if fails else 0)
EOF
rc=$?
cat "$T/py.out"
check '[ $rc -eq 0 ]' "the API checks"

# a slow client (half a request, then nothing) does not hold the server, and
# is closed at the request deadline (10 s after it connected)
code=$(curl -s -m 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/runs")
check '[ "$code" = 200 ]' "a client is answered while another trickles its request ($code)"
timeout 20 cat <&3 >/dev/null; rc=$?
waited=$(( $(date +%s) - slow_since ))
check '[ $rc -eq 0 ] && [ $waited -ge 9 ]' "the trickling connection is closed at its deadline (rc $rc after $waited s)"
exec 3<&-

after=$(sha256sum "$DB" | cut -d' ' -f1)
check '[ "$before" = "$after" ]' "the store's bytes are unchanged"
check '[ "$wal_before" = "$(ls "$DB"-wal "$DB"-shm 2>/dev/null)" ]' "no -wal or -shm appeared"
# the comparisons listing again (its summaries cached): the same reply; after the change, the new one
ncmp() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["comparisons"]))' "$1"; }
curl -s "http://127.0.0.1:$PORT/api/comparisons" >"$T/cmp1.json"
curl -s "http://127.0.0.1:$PORT/api/comparisons" >"$T/cmp2.json"
check '[ "$(ncmp "$T/cmp1.json")" = 3 ] && cmp -s "$T/cmp1.json" "$T/cmp2.json"' \
    "/api/comparisons again: the same 3 comparisons ($(ncmp "$T/cmp1.json"), $(ncmp "$T/cmp2.json"))"
"$D" runs delete ref-again --db "$DB" --yes >/dev/null 2>&1
check '[ $? -eq 0 ]' "a writer can change the store while view serves it (no lock held)"
n=$(curl -s "http://127.0.0.1:$PORT/api/runs" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')
check '[ "$n" = 2 ]' "the next request sees the change ($n runs)"
curl -s "http://127.0.0.1:$PORT/api/comparisons" >"$T/cmp3.json"
check 'python3 -c "
import json,sys; c=json.load(open(sys.argv[1]))[\"comparisons\"]
assert [(x[\"baseline\"], x[\"target\"]) for x in c] == [(\"ref\", \"int4<x>\")], c" "$T/cmp3.json"' \
    "/api/comparisons after the change: ref against int4<x> only ($(head -c 300 "$T/cmp3.json"))"

kill -INT "$VPID"
for _ in $(seq 100); do kill -0 "$VPID" 2>/dev/null || break; sleep 0.05; done
wait "$VPID"; rc=$?
check '[ $rc -eq 0 ] && grep -q "SIGINT, stopping" "$T/err"' "SIGINT stops it, exit 0 (rc $rc: $(cat "$T/err"))"
check '! curl -s -m 2 -o /dev/null "http://127.0.0.1:$PORT/"' "nothing listens after it stopped"

# a bad store: exit 2 naming it
"$D" view --db "$T/missing.db" --port 0 >"$T/o2" 2>"$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "missing.db" "$T/e2"' "missing store: exit 2 ($rc: $(cat "$T/e2"))"
echo "not a store" >"$T/junk.db"
"$D" view --db "$T/junk.db" --port 0 >"$T/o2" 2>"$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "junk.db" "$T/e2"' "not a store: exit 2 ($rc: $(cat "$T/e2"))"
"$D" view --db "$DB" --port 70000 >"$T/o2" 2>"$T/e2"; rc=$?
check '[ $rc -eq 2 ]' "--port 70000: exit 2"
"$D" view --db "$DB" --host example.com >"$T/o2" 2>"$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "not an IPv4 address" "$T/e2"' "--host NAME: exit 2 ($(cat "$T/e2"))"

# --host 0.0.0.0 warns that anyone who reaches it can read the store
"$D" view --db "$DB" --host 0.0.0.0 --port 0 >"$T/o3" 2>"$T/e3" &
WPID=$!
PIDS+=("$WPID")
wait_port_file "$T/o3" 200 || { cat "$T/e3"; fail "no PORT line (--host 0.0.0.0)"; }
check 'grep -q "warning: listening on 0.0.0.0: anyone who can reach" "$T/e3"' "--host 0.0.0.0 warns"
kill -TERM "$WPID"
wait "$WPID"; rc=$?
check '[ $rc -eq 0 ]' "SIGTERM stops it, exit 0 ($rc)"

# --open without a display: the URL printed, the page served, the failure said, no exit; the
# desktop's opener (a stand-in xdg-open on PATH) is given the URL and does not hold the view: one
# that fails, one missing, one that never returns (a browser in the foreground)
mkdir -p "$T/bin-fail" "$T/bin-hang" "$T/bin-none"
printf '#!/bin/sh\necho "$1" > "%s"\nexit 3\n' "$T/opened" > "$T/bin-fail/xdg-open"
printf '#!/bin/sh\necho $$ > "%s"\necho "$1" > "%s"\nexec /bin/sleep 600\n' "$T/hang.pid" "$T/opened" > "$T/bin-hang/xdg-open"
chmod +x "$T/bin-fail/xdg-open" "$T/bin-hang/xdg-open"
for opener in fail none hang; do
  rm -f "$T/opened"
  env -u DISPLAY -u WAYLAND_DISPLAY PATH="$T/bin-$opener" "$D" view --db "$DB" --port 0 --open >"$T/o4" 2>"$T/e4" </dev/null &
  OPID=$!
  PIDS+=("$OPID")
  wait_port_file "$T/o4" 200 || { cat "$T/e4"; fail "no PORT line (--open, $opener)"; }
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/api/runs")
  check '[ "$code" = 200 ]' "--open ($opener): the page is served ($code)"
  if [ $opener = none ]; then
    check 'grep -q "cannot run xdg-open; open http://127.0.0.1:$PORT/ yourself" "$T/e4"' "--open, no xdg-open: said, with the URL ($(cat "$T/e4"))"
  else
    for _ in $(seq 100); do [ -s "$T/opened" ] && break; sleep 0.05; done
    check 'grep -qx "http://127.0.0.1:$PORT/" "$T/opened"' "--open ($opener): xdg-open is given the URL"
  fi
  if [ $opener = fail ]; then
    for _ in $(seq 100); do grep -q "xdg-open failed" "$T/e4" && break; sleep 0.05; done
    check 'grep -q "xdg-open failed; open http://127.0.0.1:$PORT/ yourself" "$T/e4"' "--open, xdg-open fails: said, with the URL ($(cat "$T/e4"))"
  fi
  kill -TERM "$OPID"
  for _ in $(seq 100); do kill -0 "$OPID" 2>/dev/null || break; sleep 0.05; done
  check '! kill -0 "$OPID" 2>/dev/null' "--open ($opener): SIGTERM stops it within 5 s (the opener does not hold it)"
  kill -9 "$OPID" 2>/dev/null
  wait "$OPID"; rc=$?
  check '[ $rc -eq 0 ]' "--open ($opener): exit 0 ($rc: $(cat "$T/e4"))"
done
[ -s "$T/hang.pid" ] && kill -9 "$(cat "$T/hang.pid")" 2>/dev/null
finish
