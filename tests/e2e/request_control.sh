#!/usr/bin/env bash
# request_control.sh - request control (issue 37: run/measure --system,
# --system-file, --template, --extra-body, --header, --stop) end to end:
# 1. a recording server (python, OpenAI-shaped answers) receives exactly
#    what was asked: chat, the system message first and the user turn after
#    it, the extra body's fields (the user's top_k over --top-k), the stop
#    strings, the headers (a value env:VAR read from the environment); the
#    header's value is in no file the run leaves (store, stderr) and `runs
#    show` prints the request control with the header's name only; an unset
#    VAR is refused naming it; an extra body with "stream" is refused.
# 2. against `driftbench serve` (the tiny model, completions): a system
#    prompt changes the answers and is the run's identity (a resume with
#    another one exits 2 naming decoding.request.system_prompt; one with
#    another header resumes); the extra body's temperature reaches the server
#    (sampled answers differ from greedy ones); --template is recorded as
#    custom/<hash> and its text is what is sent; --stop cuts answers where
#    the string would have been.
# 2b. the same over api=chat against serve: a system prompt changes the answers,
#    a resume with another one exits 2; `divergence` re-creates the baseline's
#    system prompt (chat: against the embedded engine with the same model,
#    exactly 0 either way round) and template (a --template run's answers
#    forced under it give back the logprobs it stored).
# 3. measure takes --system and per-side --target-extra-body (serve; and,
#    against the recording server, a shared header on both sides, a side's
#    own replacing it by name, each side's own extra body).
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 is not installed"
model="$S/tests/data/models/tiny-qwen2-f16.gguf"
[ -f "$model" ] || skip_all "no $model"
spid= rpid=
on_exit() { kill -9 $spid $rpid 2> /dev/null; }

# ---- 1. the recording server ----
python3 "$S/tests/e2e/rec_server.py" "$T/rec.port" "$T/rec.log" 2> "$T/rec.err" &
rpid=$!
wait_port_file "$T/rec.port" 200 || fail "the recording server did not start: $(cat "$T/rec.err")"
RU="http://127.0.0.1:$PORT/v1?model=m&api=chat"
printf '{"prompt_id":"q1","workload":"chat","input":"hello there","reference":{}}\n' > "$T/s.jsonl"
printf 'Answer as a pirate.' > "$T/sys.txt"
printf '{"top_k": 7, "chat_template_kwargs": {"enable_thinking": false}}' > "$T/extra.json"
export REQCTL_E2E_TOKEN=tok-e2e-0451
"$D" run -q --db "$T/rec.db" --label rec --target "$RU" --suite "$T/s.jsonl" --system-file "$T/sys.txt" \
  --extra-body @"$T/extra.json" --top-k 3 --stop END --stop '###' --header 'X-Team: drift' \
  --header 'X-Token: env:REQCTL_E2E_TOKEN' > "$T/rec.out" 2> "$T/rec.stderr"
check '[ $? = 0 ]' "run against the recording server failed: $(cat "$T/rec.stderr")"
python3 - "$T/rec.log" > "$T/rec.check" 2>&1 << 'EOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in r if x["path"].endswith("/chat/completions")]
assert len(r) == 1, len(r)
b, h = r[0]["body"], {k.lower(): v for k, v in r[0]["headers"]}
assert b["messages"] == [{"role": "system", "content": "Answer as a pirate."}, {"role": "user", "content": "hello there"}], b["messages"]
assert b["top_k"] == 7, b                         # the extra body's value wins over --top-k 3
assert b["chat_template_kwargs"] == {"enable_thinking": False}, b
assert b["stop"] == ["END", "###"], b
assert b["model"] == "m" and b["stream"] is False, b
assert h["x-team"] == "drift", h
assert h["x-token"] == "tok-e2e-0451", h           # env:VAR read at open
assert "authorization" not in h, h
assert [k.lower() for k, v in r[0]["headers"]].count("x-token") == 1, r[0]["headers"]
print("ok")
EOF
check 'grep -qx ok "$T/rec.check"' "the recorded request is not what was asked: $(cat "$T/rec.check")"
check '! grep -aq "tok-e2e-0451" "$T/rec.db" "$T/rec.stderr" "$T/rec.out"' "the header's value was stored or printed"
"$D" runs show rec --db "$T/rec.db" > "$T/show.txt" 2>&1
check 'grep -q "Answer as a pirate." "$T/show.txt" && grep -q "X-Token" "$T/show.txt" && grep -q "enable_thinking" "$T/show.txt"' \
  "runs show does not print the request control: $(cat "$T/show.txt")"
check '! grep -q "tok-e2e-0451" "$T/show.txt"' "runs show printed a header value"
check 'grep -q "\"stop\":\[\"END\",\"###\"\]" "$T/show.txt"' "runs show does not print the stop strings"
unset REQCTL_E2E_TOKEN
"$D" run -q --db "$T/rec.db" --label rec2 --target "$RU" --suite "$T/s.jsonl" --header 'X-Token: env:REQCTL_E2E_TOKEN' 2> "$T/unset.err"
rc=$?
check '[ $rc = 2 ] && grep -q "REQCTL_E2E_TOKEN is not set" "$T/unset.err"' "an unset env: header was not refused by name (rc $rc): $(cat "$T/unset.err")"
"$D" run -q --db "$T/rec.db" --label rec3 --target "$RU" --suite "$T/s.jsonl" --extra-body '{"stream":true}' 2> "$T/stream.err"
rc=$?
check '[ $rc = 2 ] && grep -q "key .stream. is refused" "$T/stream.err"' "stream in the extra body was not refused (rc $rc): $(cat "$T/stream.err")"
"$D" run -q --db "$T/rec.db" --label rec4 --target "http://192.0.2.1:8000/v1?model=m" --suite "$T/s.jsonl" \
  --header 'Authorization: Bearer sk-e2e-secret' 2> "$T/auth.err"
rc=$?
check '[ $rc = 2 ] && grep -q "refusing to send header .Authorization." "$T/auth.err" && ! grep -q "sk-e2e-secret" "$T/auth.err"' \
  "an Authorization header over plain http to another host was not refused (rc $rc): $(cat "$T/auth.err")"

# measure: the shared header on both sides, a side's own replacing it by name, per-side extra bodies
RB="http://127.0.0.1:$PORT/v1?model=base&api=chat"
RT="http://127.0.0.1:$PORT/v1?model=cand&api=chat"
: > "$T/rec.log"
"$D" measure -q --db "$T/recm.db" --baseline "$RB" --target "$RT" --suite builtin:math --limit 2 --max-tokens 4 \
  --header 'X-Team: shared' --header 'X-Tier: gold' --target-header 'X-Tier: silver' --system 'S' \
  --baseline-extra-body '{"top_k": 1}' --target-extra-body '{"chat_template_kwargs": {"enable_thinking": false}}' \
  > "$T/recm.out" 2> "$T/recm.err"
rc=$?
check '[ $rc != 2 ]' "measure against the recording server failed (rc $rc): $(tail -3 "$T/recm.err")"
python3 - "$T/rec.log" > "$T/recm.check" 2>&1 << 'EOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in r if x["path"].endswith("/chat/completions")]
side = {"base": [], "cand": []}
for x in r: side[x["body"]["model"]].append(x)
assert len(side["base"]) == 2 and len(side["cand"]) == 2, {k: len(v) for k, v in side.items()}
for x in side["base"]:
    h = {k.lower(): v for k, v in x["headers"]}
    assert h["x-team"] == "shared" and h["x-tier"] == "gold", h
    assert x["body"]["top_k"] == 1 and "chat_template_kwargs" not in x["body"], x["body"]
    assert x["body"]["messages"][0] == {"role": "system", "content": "S"}, x["body"]
for x in side["cand"]:
    h = {k.lower(): v for k, v in x["headers"]}
    assert h["x-team"] == "shared" and h["x-tier"] == "silver", h
    assert [k.lower() for k, v in x["headers"]].count("x-tier") == 1, x["headers"]
    assert "top_k" not in x["body"] and x["body"]["chat_template_kwargs"] == {"enable_thinking": False}, x["body"]
    assert x["body"]["messages"][0] == {"role": "system", "content": "S"}, x["body"]
print("ok")
EOF
check 'grep -qx ok "$T/recm.check"' "measure's per-side request control is not what was asked: $(cat "$T/recm.check")"

# measure -c: a flag replaces only what it names of the file's request control (flags > file)
cat > "$T/rc.yaml" << EOF
targets:
  baseline: {url: "http://127.0.0.1:$PORT/v1", model: base, api: chat}
  target:
    url: "http://127.0.0.1:$PORT/v1"
    model: cand
    api: chat
    headers: {X-Tier: bronze}
    extra_body: {top_k: 3}
system_prompt: FILE
headers: {X-Team: file, X-Zone: eu}
suites: [builtin:math]
limit: 2
decoding: {max_tokens: 4, stop: ["@@"]}
EOF
: > "$T/rec.log"
"$D" measure -q -c "$T/rc.yaml" --db "$T/recc.db" --system FLAG --header 'X-Team: flag' --target-header 'X-Tier: iron' \
  > "$T/recc.out" 2> "$T/recc.err"
rc=$?
check '[ $rc != 2 ]' "measure -c against the recording server failed (rc $rc): $(tail -3 "$T/recc.err")"
python3 - "$T/rec.log" > "$T/recc.check" 2>&1 << 'EOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in r if x["path"].endswith("/chat/completions")]
side = {"base": [], "cand": []}
for x in r: side[x["body"]["model"]].append(x)
assert len(side["base"]) == 2 and len(side["cand"]) == 2, {k: len(v) for k, v in side.items()}
for name, tier in (("base", None), ("cand", "iron")):
    for x in side[name]:
        h = {k.lower(): v for k, v in x["headers"]}
        assert h["x-team"] == "flag" and h["x-zone"] == "eu", h
        assert h.get("x-tier") == tier, h
        assert x["body"]["messages"][0] == {"role": "system", "content": "FLAG"}, x["body"]
        assert x["body"]["stop"] == ["@@"], x["body"]
        assert ("top_k" in x["body"]) == (name == "cand"), x["body"]
print("ok")
EOF
check 'grep -qx ok "$T/recc.check"' "measure -c with flags over the file's request control: $(cat "$T/recc.check")"

# ---- 2. driftbench serve ----
"$D" serve --model "$model" --port 0 --threads 1 --lifetime 600 > "$T/sout" 2> "$T/serr" &
spid=$!
wait_port_file "$T/sout" 400 || fail "serve did not start: $(cat "$T/serr")"
U="http://127.0.0.1:$PORT/v1?model=tiny-qwen2-f16"
DB=$T/serve.db
common=(--db "$DB" --target "$U" --suite builtin:chat --limit 6 --max-tokens 12 --concurrency 2)
"$D" run -q "${common[@]}" --label plain 2> "$T/e.plain" || fail "run plain: $(cat "$T/e.plain")"
"$D" run -q "${common[@]}" --label sys --system "You are a pirate. Always answer in rhymes." 2> "$T/e.sys" ||
  fail "run sys: $(cat "$T/e.sys")"
answers() { sql "$DB" "SELECT p.prompt_id || ' ' || hex(r.text) FROM responses r JOIN runs u ON u.id = r.run_id JOIN prompts p ON p.id = r.prompt_rowid WHERE u.label = '$1' ORDER BY p.prompt_id, r.replicate"; }
answers plain > "$T/a.plain"
answers sys > "$T/a.sys"
check '[ $(wc -l < "$T/a.plain") = 6 ] && [ $(wc -l < "$T/a.sys") = 6 ]' "runs did not store 6 answers each"
ndiff=$(diff "$T/a.plain" "$T/a.sys" | grep -c '^<')
check '[ "$ndiff" -ge 1 ]' "the system prompt changed no answer"
dec=$(sql "$DB" "SELECT decoding FROM runs WHERE label='sys'")
check 'printf "%s" "$dec" | grep -q "\"system_prompt\":\"You are a pirate. Always answer in rhymes.\""' "the decoding record has no system prompt: $dec"
# identity: another system prompt is refused; another header resumes
"$D" run -q "${common[@]}" --label sys --system "You are a lawyer." 2> "$T/e.sys2"
rc=$?
check '[ $rc = 2 ] && grep -q "decoding.request.system_prompt" "$T/e.sys2"' "a resume with another system prompt was not refused (rc $rc): $(cat "$T/e.sys2")"
"$D" run "${common[@]}" --label sys --system "You are a pirate. Always answer in rhymes." --header 'X-Trace: 1' 2> "$T/e.sys3"
rc=$?
check '[ $rc = 0 ] && grep -q "resuming run" "$T/e.sys3"' "a resume with another header was refused (rc $rc): $(cat "$T/e.sys3")"
# the extra body's temperature reaches the server: sampled answers are not the greedy ones
"$D" run -q "${common[@]}" --label hot --extra-body '{"temperature": 1.5, "top_p": 1.0}' 2> "$T/e.hot" || fail "run hot: $(cat "$T/e.hot")"
answers hot > "$T/a.hot"
ndiff=$(diff "$T/a.plain" "$T/a.hot" | grep -c '^<')
check '[ "$ndiff" -ge 1 ]' "the extra body's temperature changed no answer"
# --template: recorded as custom/<hash>, sent as written (the system prompt way round: same text = same answers)
"$D" run -q "${common[@]}" --label tpl --template 'You are a pirate. Always answer in rhymes.

{input}' 2> "$T/e.tpl" || fail "run tpl: $(cat "$T/e.tpl")"
tpl=$(sql "$DB" "SELECT templates FROM runs WHERE label='tpl'")
check 'printf "%s" "$tpl" | grep -Eq "\"chat\":\"custom/[0-9a-f]{16}\""' "the template id is not custom/<hash>: $tpl"
answers tpl > "$T/a.tpl"
check 'cmp -s "$T/a.sys" "$T/a.tpl"' "the template with the system text did not send what --system sends (chat/v1 is {input})"
# --stop: every answer is cut before the stop string
stopstr=" "
"$D" run -q "${common[@]}" --label stop --stop "$stopstr" 2> "$T/e.stop" || fail "run stop: $(cat "$T/e.stop")"
nspace=$(sql "$DB" "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label='stop' AND instr(r.text, ' ') > 0")
nall=$(sql "$DB" "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label='stop' AND r.text IS NOT NULL")
nplain=$(sql "$DB" "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label='plain' AND instr(r.text, ' ') > 0")
check '[ "$nall" = 6 ] && [ "$nspace" = 0 ]' "--stop ' ' left answers with a space ($nspace of $nall)"
check '[ "$nplain" -ge 1 ]' "no plain answer holds a space: the --stop check proves nothing"
answers stop > "$T/a.stop"
check '! cmp -s "$T/a.plain" "$T/a.stop"' "--stop changed no answer"

# ---- 2b. driftbench serve over api=chat ----
# a system prompt changes chat answers and is the run's identity; teacher forcing (divergence) re-creates
# the request control the baseline's record holds: the chat run with --system and the embedded one with
# it give exactly 0 either way round; a --template run is forced under its template
UC="$U&api=chat"
cc=(--db "$DB" --target "$UC" --suite builtin:chat --limit 6 --max-tokens 12 --concurrency 2)
CSYS="You are a pirate. Always answer in rhymes."
"$D" run -q "${cc[@]}" --label cplain 2> "$T/e.cplain" || fail "run cplain: $(cat "$T/e.cplain")"
"$D" run -q "${cc[@]}" --label csys --system "$CSYS" 2> "$T/e.csys" || fail "run csys: $(cat "$T/e.csys")"
answers cplain > "$T/a.cplain"
answers csys > "$T/a.csys"
check '[ $(wc -l < "$T/a.cplain") = 6 ] && [ $(wc -l < "$T/a.csys") = 6 ]' "chat runs did not store 6 answers each"
ndiff=$(diff "$T/a.cplain" "$T/a.csys" | grep -c '^<')
check '[ "$ndiff" -ge 1 ]' "chat: the system prompt changed no answer"
dec=$(sql "$DB" "SELECT decoding FROM runs WHERE label='csys'")
check 'printf "%s" "$dec" | grep -q "\"api\":\"chat\"" && printf "%s" "$dec" | grep -q "\"system_prompt\":\"$CSYS\""' \
  "chat: the decoding record has no api chat or system prompt: $dec"
"$D" run -q "${cc[@]}" --label csys --system "You are a lawyer." 2> "$T/e.csys2"
rc=$?
check '[ $rc = 2 ] && grep -q "decoding.request.system_prompt" "$T/e.csys2"' \
  "chat: a resume with another system prompt was not refused (rc $rc): $(cat "$T/e.csys2")"
emb=(--db "$DB" --suite builtin:chat --limit 6 --max-tokens 12)
"$D" run -q "${emb[@]}" --label cemb --target "embedded:$model?api=chat&threads=1" --system "$CSYS" 2> "$T/e.cemb" ||
  fail "run cemb: $(cat "$T/e.cemb")"
"$D" run -q "${emb[@]}" --label tplemb --target "embedded:$model?threads=1" --logprobs 1 --template 'You are a pirate. Always answer in rhymes.

{input}' 2> "$T/e.tplemb" || fail "run tplemb: $(cat "$T/e.tplemb")"
zero() { # BASELINE TARGET: divergence exactly 0, nothing skipped
  "$D" --quiet divergence --db "$DB" --baseline "$1" --target "$2" --format json > "$T/div.json" 2> "$T/div.err"
  local r=$?
  [ $r = 0 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); o=d['overall']
assert d['skipped']==0 and o['positions']>0 and o['kl_max']==0 and o['same_top']==1, d
" "$T/div.json"
}
check 'zero csys cemb' "divergence of the chat run with --system against the embedded one: not exactly 0: $(head -c 400 "$T/div.json") $(cat "$T/div.err")"
check 'zero cemb csys' "divergence of the embedded chat run with --system against the HTTP one: not exactly 0: $(head -c 400 "$T/div.json") $(cat "$T/div.err")"
# the template: the HTTP run's prompts are rendered with it (the recorded template id is checked; the
# divergence was refused before), and the embedded run's answers forced under it give back the logprobs
# it stored (its own ids), so the perplexity of them all to 1e-9
"$D" --quiet divergence --db "$DB" --baseline tpl --target tplemb --format json > "$T/tpl.json" 2> "$T/tpl.err"
rc=$?
check '[ $rc = 0 ]' "divergence of the --template HTTP run (rc $rc): $(cat "$T/tpl.err")"
"$D" --quiet divergence --db "$DB" --baseline tplemb --target tplemb --format json > "$T/tpl2.json" 2> "$T/tpl2.err"
rc=$?
divergence_check stored-logprobs "$DB" tplemb > "$T/tpl.lp" 2> "$T/lp.err" || bad "reading the stored logprobs: $(cat "$T/lp.err")"
check '[ $rc = 0 ] && divergence_check forced-ppl "$T/tpl2.json" "$T/tpl.lp"' \
  "the --template run's answers forced under its template do not give its stored logprobs (rc $rc): $(head -c 300 "$T/tpl2.json") $(cat "$T/tpl2.err")"

# ---- 3. measure ----
"$D" measure --db "$T/m.db" --baseline "$U" --target "$U" --suite builtin:math --limit 3 --max-tokens 8 \
  --system "Be brief." --target-extra-body '{"temperature": 1.5}' --stop '###' > "$T/m.out" 2> "$T/m.err"
rc=$?
check '[ $rc != 2 ]' "measure with request control failed (rc $rc): $(tail -5 "$T/m.err")"
bdec=$(sql "$T/m.db" "SELECT decoding FROM runs WHERE label='baseline'")
tdec=$(sql "$T/m.db" "SELECT decoding FROM runs WHERE label='target'")
check 'printf "%s" "$bdec" | grep -q "\"system_prompt\":\"Be brief.\"" && ! printf "%s" "$bdec" | grep -q extra_body' \
  "the baseline's request is not the shared one: $bdec"
check 'printf "%s" "$tdec" | grep -q "\"system_prompt\":\"Be brief.\"" && printf "%s" "$tdec" | grep -q "\"extra_body\":{\"temperature\":1.5}"' \
  "the target's request is not the shared one with its extra body: $tdec"
check 'printf "%s" "$tdec" | grep -q "\"stop\":\[\"###\"\]"' "measure --stop is not recorded: $tdec"
finish
