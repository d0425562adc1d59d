#!/usr/bin/env bash
# replay.sh - `driftbench replay` (issue 39) against local servers:
#   1. two scripted fake servers: a request log (chat/completions bodies)
#      with math-like prompts, a json_schema request, a tools request and a
#      request the target always fails (HTTP 500): the math flip, the
#      schema flip (worse), the exact flips and where they part; the error
#      is counted, never a flip, and asked again on resume; the bodies the
#      server got keep their own parameters with the determinism overrides
#      (temperature 0, seed, no stream) and the report counts them; an
#      interrupted replay keeps what was answered and resumes with the rest;
#   2. the logged-responses mode: the log's responses as the reference,
#      the same answers served again: no flip, exit 0 with --decide point;
#   3. two `driftbench serve` profiles (ref and cpu-int4) over built-in
#      suite prompts (OpenAI batch input) with response_format and tools
#      requests: ref against itself agrees exactly on every pair, and so
#      do the guard's labels and the embeddings (the serve's own); ref
#      against int4 reports as many exact flips as the stored answers of the
#      two runs differ (counted here from the store);
#   4. bad logs: exit 2 naming file:line:field.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 needed"

# ---- 1. fake servers ----
start_server_text 'default | echo\nanswer | JSONQ | {"answer": 4}\n'
PA=$PORT
start_server_text 'answer | ANSWER=3 | The answer is 4.\\n#### 4\nanswer | JSONQ | {"answer": "four"}\nfault | BROKEN | 500\nfault | SLOW | sleep | seconds=30 | times=1\ndefault | echo\n'
PB=$PORT
HA="http://127.0.0.1:$PA/v1?model=fake&api=chat"
HB="http://127.0.0.1:$PB/v1?model=fake&api=chat"
python3 - "$T/log.jsonl" <<'EOF'
import json, sys
out = []
for k in range(1, 7):
    out.append({"model": "prod", "messages": [{"role": "user", "content": f"What is it? ANSWER={k}"}],
                "temperature": 0.7, "max_tokens": 16})
out.append({"model": "prod", "messages": [{"role": "user", "content": "BROKEN ANSWER=7"}]})
out.append({"model": "prod", "messages": [{"role": "user", "content": "JSONQ give 2+2"}], "stream": True,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {
                "type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}}}})
out.append({"model": "prod", "messages": [{"role": "user", "content": "weather? ANSWER=9"}], "seed": 7,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})
open(sys.argv[1], "w").write("".join(json.dumps(o) + "\n" for o in out))
EOF
"$D" --quiet replay --log "$T/log.jsonl" --db "$T/f.db" --baseline "$HA" --target "$HB" --retries 0 \
  --concurrency 1 --format json -o "$T/r1.json" 2> "$T/r1.err"
rc=$?
check '[ $rc -eq 1 ]' "fake replay: exit $rc, want 1 (block): $(cat "$T/r1.err")"
check 'python3 - "$T/r1.json" <<EOF
import json, sys
d = json.load(open(sys.argv[1])); c = d["classes"]
assert list(d)[0] == "schema_version" and d["schema_version"] == 1 and d["schema"] == "driftbench.replay/1", list(d)[:2]
assert d["pairs"] == 9 and d["answered"] == 8, (d["pairs"], d["answered"])
assert d["errors"] == {"baseline": 0, "target": 1, "both": 0}, d["errors"]
assert [e["id"] for e in d["error_pairs"]] == ["line-7"], d["error_pairs"]
for k, v in c.items():
    assert all(f["id"] != "line-7" for f in v["flipped"]), k
assert c["math"]["n"] == 7 and c["math"]["flips"] == 1 and c["math"]["flipped"][0]["id"] == "line-3", c["math"]
assert c["math"]["left_out"] == 1 and c["math"]["decision"] == "block", c["math"]
f = c["exact"]["flipped"]
assert [x["id"] for x in f] == ["line-3", "line-8"], f
assert f[0]["first_diff_char"] == len("The answer is "), f[0]
assert f[0]["first_diff_word"] == 3, f[0]
assert c["schema"]["n"] == 1 and c["schema"]["flips"] == 1 and c["schema"]["worse"] == 1, c["schema"]
assert c["json"]["n"] == 1 and c["json"]["flips"] == 0, c["json"]
assert c["tool_name"]["n"] == 1 and c["tool_name"]["flips"] == 0, c["tool_name"]
assert not c["guard"]["present"] and not c["semantic"]["present"]
assert d["overrides"] == {"temperature": 9, "seed": 8, "stream": 1, "model": 9}, d["overrides"]
assert d["decision"] == "block"
assert d["taxonomy"]["functional"] == 2 and d["taxonomy"]["functional_worse"] == 1, d["taxonomy"]
assert d["taxonomy"]["text_only"] == 0, d["taxonomy"]
EOF' "fake replay report: $(head -c 3000 "$T/r1.json")"

# what the server got last (one request at a time: the log's last line): its
# own parameters (tools, its seed), and the overrides
curl -s "http://127.0.0.1:$PA/last" > "$T/last.json"
check 'python3 - "$T/last.json" <<EOF
import json, sys
b = json.load(open(sys.argv[1]))
assert b["temperature"] == 0 and b["model"] == "fake" and b["seed"] == 7, b
assert b["tools"][0]["function"]["name"] == "get_weather" and b["messages"][0]["content"] == "weather? ANSWER=9", b
EOF' "the last body sent: $(cat "$T/last.json")"

# resume: nothing answered is asked again; the error is
"$D" --quiet replay --log "$T/log.jsonl" --db "$T/f.db" --baseline "$HA" --target "$HB" --retries 0 \
  --format json -o "$T/r2.json" 2> "$T/r2.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
assert d[\"baseline\"][\"asked\"] == 0 and d[\"target\"][\"asked\"] == 1, (d[\"baseline\"], d[\"target\"])
assert d[\"classes\"][\"math\"][\"flips\"] == 1
" "$T/r2.json"' "resume asked again: $(head -c 600 "$T/r2.json") $(cat "$T/r2.err")"

# interrupted (SIGINT while the target waits on a slow request, 30 s): exit
# 2, the answers before it are kept (the baseline's four at least); the next
# call asks only the rest and ends with every pair answered
for k in 1 2 SLOW 4; do printf '{"messages":[{"role":"user","content":"%s ANSWER=9"}]}\n' "$k"; done > "$T/slow.jsonl"
"$D" --quiet replay --log "$T/slow.jsonl" --db "$T/i.db" --baseline "$HA" --target "$HB" --concurrency 1 \
  --format json -o "$T/i1.json" 2> "$T/i1.err" &
ipid=$!
for _ in $(seq 400); do # the baseline's answers are stored when its side ends
  [ "$(sqlite3 "$T/i.db" "select count(*) from responses" 2> /dev/null)" = 4 ] && break
  sleep 0.05
done
sleep 2
kill -INT $ipid
wait $ipid
rc=$?
kept=$(sqlite3 "$T/i.db" "select count(*) from responses r join runs u on u.id = r.run_id where u.label = 'replay-target' and r.failed = 0")
check '[ $rc -eq 2 ] && [ ! -s "$T/i1.json" ]' "interrupted replay: exit $rc: $(cat "$T/i1.err")"
check '[ "$(sqlite3 "$T/i.db" "select count(*) from responses r join runs u on u.id = r.run_id where u.label = '"'"'replay-baseline'"'"'")" = 4 ] && [ "$kept" -le 2 ]' \
  "interrupted replay kept $(sqlite3 "$T/i.db" "select count(*) from responses") answers ($kept of the target)"
"$D" --quiet replay --log "$T/slow.jsonl" --db "$T/i.db" --baseline "$HA" --target "$HB" --format json \
  -o "$T/i2.json" 2> "$T/i2.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
assert d[\"baseline\"][\"asked\"] == 0 and d[\"target\"][\"asked\"] == 4 - int(sys.argv[2]) and d[\"answered\"] == 4, d
" "$T/i2.json" "$kept"' "resumed after the interrupt: $(head -c 600 "$T/i2.json") $(cat "$T/i2.err")"

# the stream alarm (pairs in log order): a target whose every answer differs
# (exact gated at 1%) raises it at a pair the report names; the stack
# against itself does not, and says why
for k in $(seq 1 30); do printf '{"messages":[{"role":"user","content":"JSONQ %s"}]}\n' "$k"; done > "$T/drift.jsonl"
"$D" --quiet replay --log "$T/drift.jsonl" --db "$T/a.db" --baseline "$HA" --target "$HB" --budget exact=1 \
  --alpha 0.01 --format json -o "$T/a1.json" 2> "$T/a1.err"
check 'python3 - "$T/a1.json" <<EOF
import json, sys
d = json.load(open(sys.argv[1])); a = d["classes"]["exact"]["alarm"]
assert d["alpha"] == 0.01, d["alpha"]
assert d["classes"]["exact"]["flips"] == 30, d["classes"]["exact"]
assert a["state"] == "alarm" and 2 <= a["raised_at_pair"] <= 15, a
assert a["raised_at_id"] == "line-%d" % a["raised_at_pair"] and a["raised_after"] == a["raised_at_pair"], a
assert a["lower"] > a["budget"] == 0.01 and a["n"] == 30 and a["flips"] == 30, a
assert d["classes"]["json"]["alarm"]["state"] != "alarm" and d["classes"]["tool_name"]["alarm"]["n"] == 0
EOF' "alarm on drift: $(head -c 2500 "$T/a1.json") $(cat "$T/a1.err")"
"$D" --quiet replay --log "$T/drift.jsonl" --db "$T/a.db" --baseline "$HA" --target "$HB" --budget exact=1 \
  --alpha 0.01 > "$T/a1.txt" 2>&1
check 'grep -Eq "^  exact +ALARM raised at line-[0-9]+ \(line [0-9]+\), the class.s pair [0-9]+; now 30 flips in 30 pairs" "$T/a1.txt"' "alarm text: $(cat "$T/a1.txt")"
"$D" --quiet replay --log "$T/drift.jsonl" --db "$T/a.db" --baseline "$HA" --target "$HA" --target-label same \
  --budget exact=1 --format json -o "$T/a2.json" 2> "$T/a2.err"
check 'python3 - "$T/a2.json" <<EOF
import json, sys
d = json.load(open(sys.argv[1])); a = d["classes"]["exact"]["alarm"]
assert d["classes"]["exact"]["flips"] == 0 and a["state"] != "alarm" and a["raised_at_pair"] is None, a
EOF' "no alarm on identical answers: $(head -c 2500 "$T/a2.json") $(cat "$T/a2.err")"
"$D" --quiet replay --log "$T/drift.jsonl" --db "$T/a.db" --baseline "$HA" --target "$HA" --target-label same \
  --budget exact=1 > "$T/a2.txt" 2>&1
check 'grep -Eq "^  exact +not raised: the evidence is not enough yet, lower bound 0.00% vs budget 1.00%" "$T/a2.txt"' \
  "no alarm text: $(cat "$T/a2.txt")"

# drift over time: windows by the answers' stored times; every pair in one
# window or another, the flips summed over them as in the table, the alarm
# still raised (pairs in time order) and the last window's bounds its own
"$D" --quiet replay --log "$T/drift.jsonl" --db "$T/a.db" --baseline "$HA" --target "$HB" --budget exact=1 \
  --window 1 --format json -o "$T/w1.json" 2> "$T/w1.err"
check 'python3 - "$T/w1.json" <<EOF
import json, sys
d = json.load(open(sys.argv[1])); w = d["windows"]; a = d["classes"]["exact"]["alarm"]
assert w["size_s"] == 1 and w["order"] == "time" and len(w["list"]) >= 1, w
assert sum(x["pairs"] for x in w["list"]) == 30 and sum(x["flips"]["exact"] for x in w["list"]) == 30, w
starts = [x["start_unix_ms"] for x in w["list"]]
assert starts == sorted(starts) and all(s % 1000 == 0 for s in starts), starts
assert a["state"] == "alarm" and a["raised_at_id"] == "line-%d" % a["raised_at_pair"], a
last = w["list"][-1]["alarm"]["exact"]
assert abs(last["lower"] - a["lower"]) < 1e-12 and last["state"] == "alarm", (last, a)
EOF' "windows: $(head -c 3000 "$T/w1.json") $(cat "$T/w1.err")"
"$D" --quiet replay --log "$T/drift.jsonl" --db "$T/a.db" --baseline "$HA" --target "$HB" --window auto > "$T/w2.txt" 2>&1
check 'grep -q "^drift over time (windows of [0-9]* s" "$T/w2.txt" && grep -Eq "^  20[0-9-]+T[0-9:]+Z  pairs [0-9]+  flips exact [0-9]+" "$T/w2.txt"' \
  "windows text: $(cat "$T/w2.txt")"

# privacy: --store-texts hashes keeps no text in the store (the database
# and its journal files grepped) while the pairs are judged all the same,
# in memory; a second call cannot judge them again and says so; --redact
# emails stores the texts with the addresses replaced
for k in 1 2 3 4; do
  printf '{"messages":[{"role":"user","content":"XYZZY%s mail bob@example.com ANSWER=%s"}]}\n' "$k" "$k"
done > "$T/priv.jsonl"
"$D" replay --log "$T/priv.jsonl" --db "$T/p.db" --baseline "$HA" --target "$HB" --store-texts hashes \
  --format json -o "$T/p1.json" 2> "$T/p1.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d[\"classes\"]
assert d[\"answered\"] == 4 and c[\"exact\"][\"flips\"] == 1 and c[\"math\"][\"flips\"] == 1, c
assert d[\"not_judged\"] == 0 and \"SHA-256\" in d[\"store\"], d[\"store\"]
" "$T/p1.json"' "hashed replay: $(head -c 1500 "$T/p1.json") $(cat "$T/p1.err")"
check 'grep -q "^replay: storing prompts and answers only as SHA-256 hashes" "$T/p1.err"' "said what is stored: $(cat "$T/p1.err")"
check '! grep -aq -e XYZZY -e bob@example "$T"/p.db*' "plaintext in the hashed store: $(grep -ac XYZZY "$T"/p.db*)"
check '[ "$(sqlite3 "$T/p.db" "select count(*) from responses where text like '"'"'sha256:%'"'"'")" = 8 ]' \
  "hashed answers: $(sqlite3 "$T/p.db" "select text from responses limit 2")"
"$D" --quiet replay --log "$T/priv.jsonl" --db "$T/p.db" --baseline "$HA" --target "$HB" --store-texts hashes \
  --format json -o "$T/p2.json" 2> "$T/p2.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
assert d[\"not_judged\"] == 4 and d[\"classes\"][\"exact\"][\"n\"] == 0 and d[\"target\"][\"asked\"] == 0, d
" "$T/p2.json"' "hashed resume: $(head -c 1500 "$T/p2.json") $(cat "$T/p2.err")"
"$D" --quiet replay --log "$T/priv.jsonl" --db "$T/rd.db" --baseline "$HA" --target "$HB" --redact emails \
  --format json -o "$T/p3.json" 2> "$T/p3.err"
check '! grep -aq bob@example "$T"/rd.db* && grep -aq "XYZZY1 mail \[REDACTED:emails\]" "$T/rd.db"' \
  "redacted store: $(sqlite3 "$T/rd.db" "select text from responses limit 2") $(cat "$T/p3.err")"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert d[\"classes\"][\"math\"][\"flips\"] == 1, d
" "$T/p3.json"' "redacted replay: $(head -c 800 "$T/p3.json")"
# retention: each side keeps its newest answer; the requests of the others
# go with them; a later call asks those again
"$D" --quiet replay --log "$T/priv.jsonl" --db "$T/rt.db" --baseline "$HA" --target "$HB" --retention 1 --concurrency 1 \
  --format json -o "$T/rt.json" 2> "$T/rt.err"
check 'grep -q "retention 1: 6 answers deleted" "$T/rt.err" && [ "$(sqlite3 "$T/rt.db" "select count(*) from responses")" = 2 ] && [ "$(sqlite3 "$T/rt.db" "select count(*) from prompts")" = 1 ]' \
  "retention: $(cat "$T/rt.err") $(sqlite3 "$T/rt.db" "select count(*) from responses; select count(*) from prompts")"
"$D" --quiet replay --log "$T/priv.jsonl" --db "$T/rt.db" --baseline "$HA" --target "$HB" --retention 30d \
  --format json -o "$T/rt2.json" 2> "$T/rt2.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert d[\"target\"][\"asked\"] == 3 and d[\"answered\"] == 4, d
" "$T/rt2.json" && grep -q "retention 30d: 0 answers deleted" "$T/rt2.err"' "after retention: $(head -c 600 "$T/rt2.json") $(cat "$T/rt2.err")"
"$D" replay --log "$T/priv.jsonl" --db "$T/x.db" --baseline "$HA" --target "$HB" --redact passwords > /dev/null 2> "$T/p4.err"
rc=$?
check '[ $rc -eq 2 ] && [ ! -e "$T/x.db" ] && grep -q "unknown rule .passwords." "$T/p4.err"' "bad rule: $rc $(cat "$T/p4.err")"

# /v1/completions logs: prompt bodies, asked at the completions endpoint
# (api=completions), the reply's text the content: the math flip as for chat;
# a chat spec for such a log is refused before anything is asked
CA="http://127.0.0.1:$PA/v1?model=fake&api=completions"
CB="http://127.0.0.1:$PB/v1?model=fake&api=completions"
for k in 1 2 3 4; do printf '{"model":"prod","prompt":"Q%s ANSWER=%s","temperature":1}\n' "$k" "$k"; done > "$T/compl.jsonl"
"$D" --quiet replay --log "$T/compl.jsonl" --db "$T/c.db" --baseline "$CA" --target "$CB" --format json \
  -o "$T/c1.json" 2> "$T/c1.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d[\"classes\"]
assert d[\"answered\"] == 4 and c[\"math\"][\"flips\"] == 1 and c[\"math\"][\"flipped\"][0][\"id\"] == \"line-3\", d
assert d[\"overrides\"][\"temperature\"] == 4, d[\"overrides\"]
" "$T/c1.json"' "completions replay: $(head -c 1500 "$T/c1.json") $(cat "$T/c1.err")"
"$D" --quiet replay --log "$T/compl.jsonl" --db "$T/c2.db" --baseline "$HA" --target "$CB" > /dev/null 2> "$T/c2.err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "completions requests but the target.s spec says api=chat" "$T/c2.err"' "completions log, chat spec: $rc $(cat "$T/c2.err")"

# ---- 2. the logged responses as the reference ----
python3 - "$T/log.jsonl" "$T/logged.jsonl" <<'EOF'
import json, sys
out = []
for i, l in enumerate(open(sys.argv[1])):
    req = json.loads(l)
    text = req["messages"][0]["content"]
    if "ANSWER=" not in text or "BROKEN" in text:
        continue
    k = text.split("ANSWER=")[1]
    out.append({"id": f"r{i}", "request": req, "response": {"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": f"The answer is {k}.\n#### {k}"},
         "finish_reason": "stop"}]}})
open(sys.argv[2], "w").write("".join(json.dumps(o) + "\n" for o in out))
EOF
"$D" --quiet replay --log "$T/logged.jsonl" --db "$T/l.db" --logged --target "$HA" --decide point \
  --format json -o "$T/l.json" 2> "$T/l.err"
rc=$?
check '[ $rc -eq 0 ]' "logged replay: exit $rc, want 0: $(cat "$T/l.err")"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d[\"classes\"]
assert d[\"baseline\"][\"logged\"] and d[\"baseline\"][\"label\"] == \"replay-logged\"
assert d[\"answered\"] == 7 and c[\"exact\"][\"flips\"] == 0 and c[\"math\"][\"n\"] == 7, d
" "$T/l.json"' "logged replay report: $(head -c 1500 "$T/l.json")"
"$D" --quiet replay --log "$T/log.jsonl" --db "$T/l2.db" --logged --target "$HA" > /dev/null 2> "$T/l2.err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "no line has a logged response" "$T/l2.err"' "logged without responses: $rc $(cat "$T/l2.err")"

# ---- 4. bad logs ----
printf '{"model":"m","messages":[{"role":"user","content":"hi"}]}\n{"model":"m","messages":[{"role":"user"}]}\n' > "$T/bad.jsonl"
"$D" replay --log "$T/bad.jsonl" --db "$T/b.db" --logged --target "$HA" > /dev/null 2> "$T/bad.err"
rc=$?
check '[ $rc -eq 2 ] && [ ! -e "$T/b.db" ] && grep -q "bad.jsonl:2: messages\[0\].content: missing" "$T/bad.err"' "bad log: $rc $(cat "$T/bad.err")"
printf '{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"input":"x"}}\n' > "$T/bad2.jsonl"
"$D" replay --log "$T/bad2.jsonl" --db "$T/b.db" --logged --target "$HA" > /dev/null 2> "$T/bad2.err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "bad2.jsonl:1: url: ./v1/embeddings. is not replayed" "$T/bad2.err"' "batch url: $rc $(cat "$T/bad2.err")"

# ---- 3. driftbench serve, two profiles ----
M=$S/models/qwen2-7m.gguf
start_serve ref ref
start_serve int4 cpu-int4
HREF="http://127.0.0.1:$PORT_ref/v1?model=qwen2-7m&api=chat"
HINT4="http://127.0.0.1:$PORT_int4/v1?model=qwen2-7m&api=chat"
"$D" suites export builtin:math --n 4 -o "$T/math.jsonl" 2> /dev/null
"$D" suites export builtin:chat --n 3 -o "$T/chat.jsonl" 2> /dev/null
python3 - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
out = []
for f in ("math", "chat"):
    for l in open(f"{T}/{f}.jsonl"):
        r = json.loads(l)
        out.append({"custom_id": r["prompt_id"], "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": "m", "messages": [{"role": "user", "content": r["input"]}], "max_tokens": 24}})
out.append({"custom_id": "json-1", "method": "POST", "url": "/v1/chat/completions", "body": {
    "model": "m", "max_tokens": 24, "messages": [{"role": "user", "content": "Answer in JSON: 2+2?"}],
    "response_format": {"type": "json_object"}}})
out.append({"custom_id": "tool-1", "method": "POST", "url": "/v1/chat/completions", "body": {
    "model": "m", "max_tokens": 24, "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}})
open(f"{T}/batch.jsonl", "w").write("".join(json.dumps(o) + "\n" for o in out))
EOF
EMB="http://127.0.0.1:$PORT_ref/v1?model=qwen2-7m"
"$D" --quiet replay --log "$T/batch.jsonl" --db "$T/s.db" --baseline "$HREF" --target "$HREF" \
  --baseline-label a --target-label a2 --guard builtin --embedder "$EMB" --format json -o "$T/same.json" 2> "$T/same.err"
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); c=d[\"classes\"]
assert d[\"format\"] == \"openai-batch\" and d[\"answered\"] == 9, d
for k in (\"exact\", \"guard\", \"semantic\"):
    assert c[k][\"n\"] + c[k][\"left_out\"] == 9 and c[k][\"flips\"] == 0, (k, c[k])
assert c[\"json\"][\"n\"] == 1 and c[\"tool_name\"][\"n\"] == 1 and c[\"schema\"][\"present\"] is False, c
assert d[\"guard\"].startswith(\"guard:\") and d[\"embedder\"].startswith(\"embed:\"), d
" "$T/same.json"' "ref against ref: $(head -c 1500 "$T/same.json") $(cat "$T/same.err")"
"$D" --quiet replay --log "$T/batch.jsonl" --db "$T/s.db" --baseline "$HREF" --target "$HINT4" \
  --baseline-label a --target-label b --format json -o "$T/diff.json" 2> "$T/diff.err"
rc=$?
check '[ $rc -ne 2 ]' "ref against int4: exit $rc: $(cat "$T/diff.err")"
check 'python3 - "$T/diff.json" "$T/s.db" <<EOF
import json, sqlite3, sys
d = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
rows = db.execute("""select p.prompt_id, a.text = b.text from responses a join responses b on a.prompt_rowid = b.prompt_rowid
  join prompts p on p.id = a.prompt_rowid
  where a.run_id = (select id from runs where label = ?) and b.run_id = (select id from runs where label = ?)""",
  ("a", "b")).fetchall()
assert len(rows) == 9, rows
differ = sorted(p for p, same in rows if not same)
assert d["classes"]["exact"]["flips"] == len(differ), (d["classes"]["exact"], differ)
assert sorted(f["id"] for f in d["classes"]["exact"]["flipped"]) == differ
EOF' "ref against int4 agrees with the store: $(head -c 1500 "$T/diff.json")"
# ---- 5. the code class (code39): requests that carry tests in metadata
# (driftbench_tests, driftbench_entry_point), two fake servers whose Python
# blocks differ: both pass (no flip), one fails a carried test (flip, worse);
# a request without tests: the target's block has a syntax error (flip,
# worse); a pair with no code: not counted. The text report lists the class.
start_server_text 'answer | CODE1 | ```python\\ndef sq(x):\\n    return x * x\\n```\nanswer | CODE2 | ```python\\ndef sq(x):\\n    return x * x\\n```\nanswer | CODE3 | ```python\\nx = [1, 2]\\n```\ndefault | echo\n'
QA="http://127.0.0.1:$PORT/v1?model=fake&api=chat"
start_server_text 'answer | CODE1 | ```python\\ndef sq(x):\\n    return x ** 2\\n```\nanswer | CODE2 | ```python\\ndef sq(x):\\n    return x + x\\n```\nanswer | CODE3 | ```python\\nx = [1, 2\\n```\ndefault | echo\n'
QB="http://127.0.0.1:$PORT/v1?model=fake&api=chat"
python3 - "$T/code.jsonl" <<'EOF'
import json, sys
md = {"driftbench_tests": "assert sq(2) == 4\nassert sq(3) == 9", "driftbench_entry_point": "sq"}
out = [{"model": "prod", "messages": [{"role": "user", "content": "CODE1 write sq"}], "metadata": md},
       {"model": "prod", "messages": [{"role": "user", "content": "CODE2 write sq"}], "metadata": md},
       {"model": "prod", "messages": [{"role": "user", "content": "CODE3 a list"}]},
       {"model": "prod", "messages": [{"role": "user", "content": "no code here"}]}]
open(sys.argv[1], "w").write("".join(json.dumps(o) + "\n" for o in out))
EOF
"$D" --quiet replay --log "$T/code.jsonl" --db "$T/code.db" --baseline "$QA" --target "$QB" --retries 0 \
  --format json -o "$T/code.json" 2> "$T/code.err"
rc=$?
check '[ $rc -ne 2 ]' "code replay: exit $rc: $(cat "$T/code.err")"
check 'python3 - "$T/code.json" <<EOF
import json, sys
d = json.load(open(sys.argv[1])); c = d["classes"]["code"]
assert d["answered"] == 4, d["answered"]
assert c["present"] and c["n"] == 3 and c["flips"] == 2 and c["worse"] == 2 and c["better"] == 0, c
assert c["left_out"] == 0 and abs(c["budget"] - 0.02) < 1e-12, c
assert sorted(f["id"] for f in c["flipped"]) == ["line-2", "line-3"], c["flipped"]
assert all(f["direction"] == -1 for f in c["flipped"]), c["flipped"]
assert d["taxonomy"]["functional"] >= 2, d["taxonomy"]
EOF' "code class: $(head -c 2000 "$T/code.json") $(cat "$T/code.err")"
"$D" --quiet replay --log "$T/code.jsonl" --db "$T/code.db" --baseline "$QA" --target "$QB" > "$T/code.txt" 2>&1
check 'grep -Eq "^code +3 +2 " "$T/code.txt"' "code row in the text report: $(cat "$T/code.txt")"
finish
