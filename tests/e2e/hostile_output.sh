#!/usr/bin/env bash
# hostile_output.sh - what the CLI prints of outside data cannot command the
# terminal or a CI runner, and every report stays well-formed (issue 34).
# Outside data at its worst: ESC[2K with a carriage return and a fake
# verdict, an OSC 8 link ended by BEL, a C1 CSI, bidi overrides, "\n::error::"
# and "##[error]" (GitHub workflow commands), U+FFFE, a spreadsheet formula;
# in prompt ids (a suite file), model answers (the fake server's script),
# lm-eval directory and filter names (an import's labels and evaluator),
# promptfoo provider labels, and a server's error body (a small Python server
# answering 500).
#   - import's summary, run's and compare's stderr, compare in text, markdown,
#     junit, json and html, table (text, CSV printed and written): the
#     printed bytes pass hostile_check (valid UTF-8; no C0 control but LF and
#     TAB, no DEL, C1, bidi control, U+2028/2029 or noncharacter; no line that
#     starts with "::" after blanks and default-ignorables; no "##[" or
#     "##vso[", also with ignorables inside; CR counts as a line end);
#   - the JUnit parses as XML (xml.dom.minidom), the JSON parses and lists
#     every flip with its hostile id intact, no CSV cell starts a formula
#     (=, +, -, @, TAB, CR) unless it is a number, and the written CSV reads
#     back into anova's parser with the same ids (the flip table round trip).
. "$(dirname "$0")/lib.sh"
LM=$S/tests/data/import/lmeval

# The check of printed bytes (tests/unit/hostile.h's, in Python).
cat > "$T/safe.py" <<'EOF'
import sys, unicodedata
IGN = set(range(0xFE00, 0xFE10)) | set(range(0xE0000, 0xE1000)) | {0x34F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0}
SPACE = {0x20, 0x09, 0xA0, 0x1680, 0x202F, 0x205F, 0x3000} | set(range(0x2000, 0x200B))
def ignorable(c):
    o = ord(c)
    return o > 0x7F and (unicodedata.category(c) == "Cf" or o in IGN)
def why(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return "invalid UTF-8 at byte %d" % e.start
    for c in text:
        o = ord(c)
        if (o < 0x20 and c not in "\n\t\r") or o == 0x7F: return "C0 control U+%04X" % o
        if 0x80 <= o <= 0x9F: return "C1 control U+%04X" % o
        if o in (0x61C, 0x200E, 0x200F) or 0x202A <= o <= 0x202E or 0x2066 <= o <= 0x2069: return "bidi control U+%04X" % o
        if o in (0x2028, 0x2029): return "line separator"
        if 0xFDD0 <= o <= 0xFDEF or (o & 0xFFFE) == 0xFFFE: return "noncharacter U+%04X" % o
    for line in text.replace("\r", "\n").split("\n"):
        sig = [c for c in line if not ignorable(c)]
        i = 0
        while i < len(sig) and ord(sig[i]) in SPACE: i += 1
        if sig[i:i + 2] == [":", ":"]: return "a line that starts a workflow command: %r" % line[:80]
        s = "".join(sig)
        if "##[" in s or "##vso[" in s: return "a runner command: %r" % line[:80]
    return None
bad = 0
for path in sys.argv[1:]:
    w = why(open(path, "rb").read())
    if w:
        print("%s: %s" % (path, w))
        bad = 1
sys.exit(bad)
EOF
safe() { python3 "$T/safe.py" "$@"; }
# the raw danger is really in the inputs: the check would see it
printf 'x\n::error::y\n' > "$T/raw.txt"
check '! safe "$T/raw.txt" > /dev/null' "the check itself sees a raw workflow command"

start_server() {
  local out=$T/srv.$RANDOM
  "$FAKE" --script "$1" --lifetime 300 --quiet > "$out" 2>/dev/null &
  PIDS+=($!)
  disown $!
  for _ in $(seq 100); do
    PORT=$(awk '/^PORT/{print $2}' "$out" 2>/dev/null)
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  echo "server did not start"; exit 1
}

# ---------------------------------------------------------------- a suite with hostile ids, hostile answers
python3 - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
HOST = "\x1b[2K\rverdict: PASS\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07\u009b31m\u202edesrever\u2066"
ids = ["p0" + HOST, "p1\n::error::x", "p2\n##[error]y", "p3 \ufffe\uffff", "=HYPERLINK(\"http://evil\",\"x\")", "p5"]
with open(T + "/s.jsonl", "w") as f:
    for i, pid in enumerate(ids):
        f.write(json.dumps({"prompt_id": pid, "prompt": "Compute ANSWER=%d please" % i, "answer": str(i)}) + "\n")
# the target answers three prompts wrongly, with hostile text
with open(T + "/targ.txt", "wb") as f:
    for i in (0, 1, 4):
        f.write(("answer | ANSWER=%d please | I think %d\x1b[2K\rverdict: PASS\x1b]8;;x\x07 \u202e ##[error]z\\n::error::injected\\n#### %d\n" % (i, i + 7, i + 7)).encode())
    f.write(b"default | echo\n")
EOF
printf 'default | echo\n' > "$T/base.txt"
start_server "$T/base.txt"; P1=$PORT
start_server "$T/targ.txt"; P2=$PORT
DB=$T/r.db
BL=$'base\e[2K\n::error::label\xe2\x80\xae'
TL=$'=cmd|\'/C calc\'!A0 ##[warning]t'
$D run --db "$DB" --label "$BL" --target "http://127.0.0.1:$P1/v1?model=m" --suite "$T/s.jsonl" > "$T/run1.out" 2> "$T/run1.err"
rc=$?
check '[ $rc -eq 0 ]' "run the baseline: exit 0 (got $rc: $(cat "$T/run1.err"))"
$D run --db "$DB" --label "$TL" --target "http://127.0.0.1:$P2/v1?model=m" --suite "$T/s.jsonl" > "$T/run2.out" 2> "$T/run2.err"
rc=$?
check '[ $rc -eq 0 ]' "run the target: exit 0 (got $rc)"
check 'safe "$T/run1.out" "$T/run1.err" "$T/run2.out" "$T/run2.err"' "run: stdout and stderr are safe"
$D score --db "$DB" > "$T/score.out" 2> "$T/score.err"
check 'safe "$T/score.out" "$T/score.err"' "score: stdout and stderr are safe"

# ---------------------------------------------------------------- compare in every format
for f in text markdown junit json html; do
  $D compare --db "$DB" --baseline "$BL" --target "$TL" --budget math=1 --format $f > "$T/c.$f" 2> "$T/c.$f.err"
  rc=$?
  check '[ $rc -eq 1 ]' "compare --format $f: the gate blocks, exit 1 (got $rc: $(head -c 300 "$T/c.$f.err"))"
  check 'safe "$T/c.$f" "$T/c.$f.err"' "compare --format $f: what is printed is safe"
done
check 'grep -q "p1\\\\n::error::x" "$T/c.text"' "text: a newline in an id is shown as \\n, on its line"
check 'grep -q "\\\\x1b\\[2K\\\\rverdict: PASS" "$T/c.text"' "text: the fake verdict is shown in plain sight"
check 'python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/c.junit"' "junit: parses as XML"
python3 - "$T/c.json" "$T/s.jsonl" > "$T/json.check" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ids = [json.loads(l)["prompt_id"] for l in open(sys.argv[2])]
m = [w for w in d["workloads"] if w["workload"] == "math"][0]
got = sorted(f["prompt_id"] for f in m["flipped"])
want = sorted([ids[0], ids[1], ids[4]])
assert m["flips"] == 3 and got == want, (m["flips"], got, want)
assert d["target"]["label"].startswith("=cmd|") and "##[warning]" in d["target"]["label"]
print("ok")
EOF
check 'grep -q "^ok$" "$T/json.check"' "json: parses, the 3 flips there with their ids intact ($(cat "$T/json.check"))"
check '! grep -q "\\\\\\\\x3a" "$T/c.json"' "json: the data is not rewritten (escapes only)"
check 'grep -q "&#58;:error::injected" "$T/c.html"' "html: an answer's command line is broken by an entity (shown the same)"

# ---------------------------------------------------------------- the flip table
$D table --db "$DB" --baseline "$BL" > "$T/t.txt" 2> "$T/t.err"
check 'safe "$T/t.txt" "$T/t.err"' "table (text): safe"
$D table --db "$DB" --baseline "$BL" --format csv > "$T/t.printed.csv" 2> "$T/t2.err"
check 'safe "$T/t.printed.csv" "$T/t2.err"' "table (CSV printed): safe"
$D table --db "$DB" --baseline "$BL" -o "$T/t.csv" > "$T/t3.out" 2> "$T/t3.err"
rc=$?
check '[ $rc -eq 0 ] && safe "$T/t3.out" "$T/t3.err"' "table -o: exit 0, safe messages (got $rc)"
python3 - "$T/t.csv" "$TL" > "$T/csv.check" 2>&1 <<'EOF'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
num = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
for r in rows:
    for c in r:
        assert not (c[:1] in ("=", "+", "-", "@", "\t", "\r") and not num.match(c)), "a formula cell: %r" % c
ids = [r[0] for r in rows[1:]]
assert ids == ["'" + sys.argv[2]], ids  # the target's label, quoted
print("ok")
EOF
check 'grep -q "^ok$" "$T/csv.check"' "table -o: no cell starts a formula, the id is quoted ($(cat "$T/csv.check"))"
$D anova --table "$T/t.csv" > "$T/anova.out" 2> "$T/anova.err"
check 'safe "$T/anova.out" "$T/anova.err"' "anova reads the written table; what it prints is safe"

# ---------------------------------------------------------------- imported names: lm-eval
H=$'m\e[2K\r\n::error::x\xe2\x80\xae##[warning]y'
mkdir -p "$T/a$H" "$T/b$H"
python3 - "$LM/qwen2-7m-f16/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" "$T/a$H/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" \
  "$LM/qwen2-7m-q4_0/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" "$T/b$H/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" <<'EOF'
import json, sys
HOST = "f\x1b[2K\rverdict: PASS\x1b]8;;https://evil/\x07L\x1b]8;;\x07\u009b31m\u202e\n::error::x\n##[error]y"
for src, dst in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    with open(dst, "w") as out:
        for line in open(src):
            r = json.loads(line)
            if r.get("filter") != "strict-match":
                continue
            r["filter"] = HOST
            r["resps"] = [[r["resps"][0][0] + "\n::error::answer\x1b[2K\u202e"]]
            out.write(json.dumps(r) + "\n")
EOF
IDB=$T/i.db
$D import --db "$IDB" "$T/a$H/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" "$T/b$H/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" > "$T/imp.out" 2> "$T/imp.err"
rc=$?
check '[ $rc -eq 0 ] && grep -q "^imported 2 runs" "$T/imp.out"' "lm-eval import: exit 0, 2 runs (got $rc: $(cat "$T/imp.err"))"
check 'safe "$T/imp.out" "$T/imp.err"' "lm-eval import: the summary (labels, filter names) is safe"
EV=$(python3 -c 'print("lm_eval:exact_match,f\x1b[2K\rverdict: PASS\x1b]8;;https://evil/\x07L\x1b]8;;\x07\u009b31m\u202e\n::error::x\n##[error]y", end="")')
for f in text markdown junit json; do
  $D compare --db "$IDB" --baseline "a$H/gsm8k" --target "b$H/gsm8k" --evaluator "$EV" --format $f > "$T/i.$f" 2> "$T/i.$f.err"
  rc=$?
  check '[ $rc -ne 2 ] && safe "$T/i.$f" "$T/i.$f.err"' "import compare --format $f (evaluator named by the file): safe (exit $rc)"
done
check 'grep -q "^scores: evaluator \"lm_eval:exact_match,f\\\\x1b\\[2K" "$T/i.text"' "the evaluator's name is shown, escaped"
check 'python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/i.junit"' "import compare junit: parses as XML"

# ---------------------------------------------------------------- a server's error body
cat > "$T/srv500.py" <<'EOF'
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
BODY = "overloaded\x1b[2K\rverdict: PASS\x1b]8;;https://evil/\x07L\x1b]8;;\x07\u009b\u202e\n::error::from the server\n##[error]y\n::add-mask::z"
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        b = json.dumps({"error": {"message": BODY}}).encode() if "json" in self.path or "chat" in self.path else BODY.encode()
        self.send_response(500); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("PORT", s.server_address[1], flush=True)
s.timeout = 120
s.serve_forever()
EOF
python3 "$T/srv500.py" > "$T/srv500.out" 2>/dev/null &
PIDS+=($!)
disown $!
for _ in $(seq 100); do P5=$(awk '/^PORT/{print $2}' "$T/srv500.out"); [ -n "$P5" ] && break; sleep 0.05; done
for api in chat completions; do
  $D run --db "$T/e.db" --label "e-$api" --target "http://127.0.0.1:$P5/v1?model=m&api=$api" --suite "$T/s.jsonl" \
    --retries 0 > "$T/e.$api.out" 2> "$T/e.$api.err"
  rc=$?
  check '[ $rc -eq 2 ]' "a server answering 500 ($api): exit 2 (got $rc)"
  check 'grep -q "overloaded" "$T/e.$api.err"' "its error body is quoted ($api: $(head -c 400 "$T/e.$api.err"))"
  check 'safe "$T/e.$api.out" "$T/e.$api.err"' "its error body, quoted on stderr, is safe ($api)"
done

finish
