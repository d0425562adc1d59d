#!/usr/bin/env bash
# torch_server.sh - a real second framework in every CI run: the PyTorch server (tools/torch_server/serve.py)
# on the CPU in fp32 serves models/qwen2-7m.gguf, and `driftbench measure` compares it with the embedded
# engine's `ref` profile on a few prompts of each workload but long context (one long-context prompt costs
# about 10 s of CPU on each side with Debian's reference BLAS) through the chat API, then math through the
# completions API with logprobs.
# Checks: no request errors; every prompt tokenized to the same number of tokens (the server's own GGUF
# tokenizer and chat template against the engine's); most answers identical (thresholds set with margin
# below the measured agreement: PyTorch's float32 kernels differ from ref's float64 accumulation, so a near-tie
# may flip, which is the drift DriftBench measures, but a wrong forward pass or tokenizer breaks almost every
# answer); the first token's logprob close to the engine's; its prompt logprobs (completions, chat, echo) read by
# `driftbench divergence` give the engine's figures (see the phase below); bad requests get a 4xx with an OpenAI error
# object and leave the server up; every shipped model's logits match the float64 fixtures; a truncated GGUF and --attn sdpa on a torch without SDPA exit 2; corrupted
# GGUF files are rejected cleanly (fuzz_gguf.py).
# Without a python3 that imports torch (Debian: python3-torch; `make test` installs it) it prints SKIP.
. "$(dirname "$0")/lib.sh"
SPID=
on_exit() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; sleep 0.2; [ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null; }
phase() { echo "[$SECONDS s] $*"; }

PY=
for c in ${DRIFT_TORCH_PYTHON:-} /usr/bin/python3 python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch, numpy' 2>/dev/null; then PY=$(command -v "$c"); break; fi
done
if [ -z "$PY" ]; then
  echo "SKIP: no python3 that imports torch and numpy (apt-get install python3-torch, or set DRIFT_TORCH_PYTHON)"
  exit 0
fi
echo "python: $PY, torch $("$PY" -c 'import torch; print(torch.__version__)')"
SERVE=$S/tools/torch_server/serve.py
MODEL=$S/models/qwen2-7m.gguf

# ---- start the server on a free port; bounded wait for its "listening on" line and /health
"$PY" "$SERVE" --model "$MODEL" --port 0 --threads 1 > "$T/srv.out" 2> "$T/srv.err" &
SPID=$!
PORT=
for _ in $(seq 1200); do  # up to 120 s: importing torch on a loaded 2-core machine takes seconds
  PORT=$(sed -n 's#^listening on http://127.0.0.1:\([0-9]*\)$#\1#p' "$T/srv.out")
  [ -n "$PORT" ] && break
  kill -0 "$SPID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$PORT" ]; then echo "FAIL: the server did not start"; cat "$T/srv.err"; exit 1; fi
BASE=http://127.0.0.1:$PORT
phase "server listening on port $PORT"
code=$(curl -s -m 30 -o "$T/health" -w '%{http_code}' "$BASE/health")
check '[ "$code" = 200 ]' "GET /health -> 200 (got $code)"
"$PY" - "$T/health" <<'EOF' || bad "/health reports the knobs"
import json, sys
h = json.load(open(sys.argv[1]))
assert h["status"] == "ok" and h["framework"] == "pytorch" and h["model"] == "qwen2-7m", h
for k, v in {"dtype": "fp32", "attn": "math", "batch": 1, "device": "cpu", "tf32": "off"}.items():
    assert h[k] == v, (k, h[k])
assert h["weight_types"] == {"F16": 43, "F32": 31}, h["weight_types"]
EOF

# ---- measure: embedded ref (baseline) vs the server (target), chat API, every workload
DB=$T/m.db
EMB="embedded:$MODEL?profile=ref&batch=8"
run_measure() {  # API LIMIT SUITES... (extra flags after --)
  local api=$1 limit=$2; shift 2
  $D --quiet measure --db "$DB" --baseline "$EMB&api=$api" --target "$BASE/v1?model=qwen2-7m&api=$api" \
    --baseline-label "ref-$api" --target-label "torch-$api" --limit "$limit" --timeout 120 --retries 1 "$@" \
    > "$T/measure-$api.txt" 2>&1
}
# Every workload out of the gate: what is checked here is the agreement below,
# not a decision (5 prompts a workload cannot decide a budget, exit 3, and chat
# measured without an embedder has no counted pair, exit 2); so exit 0 exactly.
phase "measure, chat API"
run_measure chat 5 --suite builtin:math --suite builtin:code --suite builtin:safety --suite builtin:chat --max-tokens 64 \
  --budget math=none,code=none,safety=none,chat=none
rc=$?
check '[ $rc -eq 0 ] && grep -q "^verdict: not gated (exit 0)" "$T/measure-chat.txt"' "measure (chat) ran, nothing gated (exit $rc)"
[ $rc -eq 0 ] || cat "$T/measure-chat.txt"
phase "measure, completions API with logprobs"
run_measure completions 5 --suite builtin:math --max-tokens 64 --logprobs 3 --budget math=none
rc=$?
check '[ $rc -eq 0 ]' "measure (completions, logprobs) ran, nothing gated (exit $rc)"
[ $rc -eq 0 ] || cat "$T/measure-completions.txt"

# per workload: pairs, errors, same prompt token count, identical texts
sqlite3 -separator ' ' "$DB" "
select a.label, p.workload, count(*), sum(x.error is not null or y.error is not null),
       sum(x.prompt_tokens = y.prompt_tokens), sum(x.text = y.text), sum(x.finish_reason = y.finish_reason)
from responses x join runs a on x.run_id = a.id join prompts p on p.id = x.prompt_rowid
join responses y on y.prompt_rowid = x.prompt_rowid and y.replicate = x.replicate join runs b on y.run_id = b.id
where a.label like 'ref-%' and b.label = replace(a.label, 'ref-', 'torch-') group by 1, 2 order by 1, 2" > "$T/agree.txt"
cat "$T/agree.txt"
# label workload n errors same_prompt_tokens identical_texts same_finish
# minimum identical texts per (api, workload), out of n (measured: 100%: 20/20 of each of math, code, safety, chat)
declare -A MIN=([ref-chat:math]=4 [ref-chat:code]=4 [ref-chat:safety]=4 [ref-chat:chat]=4 [ref-completions:math]=4)
for key in "${!MIN[@]}"; do
  lab=${key%%:*} wl=${key#*:}
  line=$(awk -v l="$lab" -v w="$wl" '$1 == l && $2 == w' "$T/agree.txt")
  read -r _ _ n errs samep same _ <<< "$line"
  check '[ -n "$line" ]' "$key: pairs stored"
  [ -n "$line" ] || continue
  check '[ "$errs" = 0 ]' "$key: $errs request errors"
  check '[ "$samep" = "$n" ]' "$key: prompt token counts equal on $samep of $n (tokenizer / chat template)"
  check '[ "$same" -ge "${MIN[$key]}" ]' "$key: identical answers $same of $n (want >= ${MIN[$key]})"
done

phase "logprobs against driftbench generate"
# logprobs: stored for every target answer (the HTTP client parsed the server's completions-shape logprobs),
# and on a few prompts each generated token's logprob within 1e-3 of `driftbench generate --logprobs` (ref)
nolp=$(sqlite3 "$DB" "select count(*) from responses x join runs r on x.run_id = r.id where r.label = 'torch-completions' and x.logprobs is null")
check '[ "$nolp" = 0 ]' "logprobs stored for every torch-completions answer ($nolp without)"
for q in 'Question: What is 12 + 35?\nAnswer:' 'Write a haiku about rain.' 'def add(a, b):'; do
  p=$(printf "$q")
  $D generate --model "$MODEL" --profile ref --prompt "$p" --max-tokens 6 --logprobs 3 > "$T/gen.txt" 2>/dev/null
  body=$("$PY" -c 'import json,sys; print(json.dumps({"model": "qwen2-7m", "prompt": sys.argv[1], "max_tokens": 6, "temperature": 0, "logprobs": 3}))' "$p")
  curl -s -m 60 -o "$T/lp.json" "$BASE/v1/completions" -H 'Content-Type: application/json' --data-binary "$body"
  "$PY" - "$T/gen.txt" "$T/lp.json" <<'EOF2' || bad "logprobs of '$q' match the engine's"
import json, re, sys
eng = [float(m.group(1)) for m in re.finditer(r'^\s*\d+\s+".*?"\s+(-?[0-9.]+)\s', open(sys.argv[1]).read(), re.M)]
lp = json.load(open(sys.argv[2]))["choices"][0]["logprobs"]
got = lp["token_logprobs"]
assert eng and len(got) >= 1 and all(len(t) == 3 for t in lp["top_logprobs"]), (eng, lp)
n = min(len(eng), len(got))
d = max(abs(a - b) for a, b in zip(eng[:n], got[:n]))
print("logprobs vs engine ref: %d tokens, max |diff| %.1e" % (n, d))
assert d < 1e-3, d
EOF2
done

phase "prompt logprobs: divergence over HTTP against the embedded engine"
# The server's prompt_logprobs (completions and chat) and echo+logprobs, read by `driftbench divergence`
# (docs/divergence-http.md): the embedded ref run's answers forced through the server give what the engine
# gives up to PyTorch's float32 noise (every answer token paired, top-1 the same, KL under 1e-6 nats, the
# forced tokens' perplexity within 1e-4); and the server against embedded cpu-int4 gives the embedded
# ref-vs-int4 figure within the top-K bound's tolerance (a lower bound of the full KL up to 1% for that
# noise, at least 90% of it), by each way the server offers.
KDB=$T/kl.db
KR=(--db "$KDB" --suite builtin:math --suite builtin:chat --limit 2 --max-tokens 24)
for api in completions chat; do
  $D --quiet run "${KR[@]}" --label "ref-$api" --target "embedded:$MODEL?profile=ref&api=$api" || bad "run ref-$api"
  $D --quiet run "${KR[@]}" --label "int4-$api" --target "embedded:$MODEL?profile=cpu-int4&api=$api" || bad "run int4-$api"
  $D --quiet run "${KR[@]}" --label "torch-$api" --target "$BASE/v1?model=qwen2-7m&api=$api" --timeout 120 || bad "run torch-$api"
done
kdiv() { # NAME BASELINE TARGET [ARGS]
  local n=$1 b=$2 t=$3; shift 3
  $D --quiet divergence --db "$KDB" --baseline "$b" --target "$t" --format json "$@" > "$T/$n.json" 2> "$T/$n.err"
  rc=$?
}
for way in completions:prompt_logprobs completions:echo chat:prompt_logprobs; do
  api=${way%%:*} m=${way#*:}
  kdiv "same-$api-$m" "ref-$api" "torch-$api" --http-logprobs "$m"
  check '[ $rc -eq 0 ] && "$PY" -c "
import json,sys
d=json.load(open(sys.argv[1])); o=d[\"overall\"]
assert d[\"method\"]==\"top-K (%s)\" % sys.argv[2], d[\"method\"]
assert d[\"skipped\"]==0 and o[\"positions\"]==96, o
assert all(p[\"unaligned\"]==0 for p in d[\"prompts\"]), d[\"prompts\"]
assert o[\"same_top\"]==1 and o[\"kl_mean\"]<1e-6, o
assert abs(o[\"ppl_target\"]-o[\"ppl_base\"])<=1e-4*o[\"ppl_base\"], o
print(\"torch %s %s: mean KL vs embedded ref %.2e, max %.2e\" % (sys.argv[3], sys.argv[2], o[\"kl_mean\"], o[\"kl_max\"]))
" "$T/same-$api-$m.json" "$m" "$api"' "$api $m: embedded ref forced through the torch server = the engine (rc $rc): $(head -c 500 "$T/same-$api-$m.json") $(cat "$T/same-$api-$m.err")"
  kdiv "emb-$api" "int4-$api" "ref-$api"
  kdiv "tq-$api-$m" "int4-$api" "torch-$api" --http-logprobs "$m"
  check '[ $rc -eq 0 ] && "$PY" -c "
import json,sys
e=json.load(open(sys.argv[1]))[\"overall\"]; h=json.load(open(sys.argv[2]))[\"overall\"]
assert e[\"positions\"]==h[\"positions\"]==96 and e[\"kl_mean\"]>1e-4, (e, h)
assert 0.9*e[\"kl_mean\"]<=h[\"kl_mean\"]<=1.01*e[\"kl_mean\"], (h[\"kl_mean\"], e[\"kl_mean\"])
print(\"int4 vs %s: embedded ref (full) %.6f, torch server top-K %.6f (%.1f%%)\" % (sys.argv[3], e[\"kl_mean\"], h[\"kl_mean\"], 100*h[\"kl_mean\"]/e[\"kl_mean\"]))
" "$T/emb-$api.json" "$T/tq-$api-$m.json" "$api $m"' "$api $m: int4 vs the torch server within the tolerance of int4 vs embedded ref (rc $rc): $(head -c 300 "$T/tq-$api-$m.json") $(cat "$T/tq-$api-$m.err")"
done
C=/v1/completions H=/v1/chat/completions
post() {  # PATH BODY -> "code" (body in $T/resp)
  curl -s -m 30 -o "$T/resp" -w '%{http_code}' -H 'Content-Type: application/json' "$BASE$1" --data-binary "$2"
}
got=$(post $C '{"model": "qwen2-7m", "prompt": "hi", "prompt_logprobs": 21}')
check '[ "$got" = 400 ]' "prompt_logprobs over 20: want 400, got $got"
got=$(post $H '{"model": "qwen2-7m", "messages": [{"role": "user", "content": "hi"}], "continue_final_message": true, "add_generation_prompt": false}')
check '[ "$got" = 400 ] && grep -q "assistant message last" "$T/resp"' "continue_final_message without an assistant message last: want 400, got $got"
got=$(post $H '{"model": "qwen2-7m", "messages": [{"role": "user", "content": "hi"}], "echo": true}')
check '[ "$got" = 400 ]' "echo on chat: want 400, got $got"

phase "bad requests"
# ---- bad requests: 4xx with an OpenAI error object; the server stays up
post() {  # PATH BODY -> "code" (body in $T/resp)
  curl -s -m 30 -o "$T/resp" -w '%{http_code}' -H 'Content-Type: application/json' "$BASE$1" --data-binary "$2"
}
err_ok() { "$PY" -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert isinstance(e["message"], str) and e["message"]' "$T/resp" 2>/dev/null; }
expect() {  # CODE PATH BODY WHAT
  local want=$1 got; got=$(post "$2" "$3")
  check '[ "$got" = "$want" ] && err_ok' "$4: want $want with an error object, got $got $(head -c 200 "$T/resp")"
}
C=/v1/completions H=/v1/chat/completions
expect 400 $C '{"model": "qwen2-7m", "prompt": ' "truncated JSON"
expect 400 $C '[1, 2]' "a JSON array body"
expect 404 $C '{"model": "gpt-4", "prompt": "hi"}' "unknown model"
expect 400 $C '{"prompt": "hi"}' "missing model"
expect 400 $C '{"model": "qwen2-7m"}' "missing prompt"
expect 400 $C '{"model": "qwen2-7m", "prompt": 5}' "prompt of the wrong type"
expect 400 $C '{"model": "qwen2-7m", "prompt": "hi", "n": 2}' "n > 1"
expect 400 $C '{"model": "qwen2-7m", "prompt": "hi", "max_tokens": "8"}' "max_tokens as a string"
expect 400 $C '{"model": "qwen2-7m", "prompt": "hi", "temperature": -1}' "negative temperature"
expect 400 $C '{"model": "qwen2-7m", "prompt": "hi", "logprobs": 99}' "logprobs over 20"
expect 400 $C '{"model": "qwen2-7m", "prompt": "hi", "stop": [1]}' "stop of the wrong type"
expect 400 $H '{"model": "qwen2-7m", "messages": []}' "empty messages"
expect 400 $H '{"model": "qwen2-7m", "messages": [{"role": "wizard", "content": "hi"}]}' "unknown role"
expect 400 $H '{"model": "qwen2-7m", "messages": [{"role": "user", "content": "hi"}], "logprobs": 3}' "chat logprobs not a boolean"
expect 400 $C "{\"model\": \"qwen2-7m\", \"prompt\": \"$(printf 'word %.0s' $(seq 5000))\"}" "prompt longer than the context"
expect 404 /v1/nothing '{}' "unknown endpoint"
expect 400 $C '{"model": "qwen2-7m", "prompt": "a\ud800b"}' "a lone surrogate in the prompt"
expect 400 $C "$(printf '[%.0s' $(seq 20000))" "JSON nested 20000 deep"
head -c 9000000 /dev/zero | tr '\0' ' ' > "$T/big"
got=$(curl -s -m 30 -o "$T/resp" -w '%{http_code}' -H 'Content-Type: application/json' "$BASE$C" --data-binary @"$T/big")
check '[ "$got" = 413 ] && err_ok' "oversize body: want 413, got $got"
got=$(curl -s -m 30 -o "$T/resp" -w '%{http_code}' -H 'Expect:' -H 'Content-Type: application/json' "$BASE$C" --data-binary @"$T/big")
check '[ "$got" = 413 ] && err_ok' "oversize body sent at once (no 100-continue): want 413, got $got"
got=$(post $C '{"model": "qwen2-7m", "prompt": "Question: What is 2 + 3?\nAnswer:", "max_tokens": 4, "temperature": 0.8, "seed": 7}')
cp "$T/resp" "$T/s1"
post $C '{"model": "qwen2-7m", "prompt": "Question: What is 2 + 3?\nAnswer:", "max_tokens": 4, "temperature": 0.8, "seed": 7}' > /dev/null
check '[ "$got" = 200 ] && "$PY" -c "import json,sys; a,b=(json.load(open(f))[\"choices\"][0][\"text\"] for f in sys.argv[1:]); assert a == b" "$T/s1" "$T/resp"' \
  "seeded sampling: same seed, same answer (after the bad requests: the server is up)"
check 'kill -0 $SPID 2>/dev/null' "server alive after the bad requests"

phase "start-up errors"
# ---- start-up errors exit 2 with a message
head -c 100 "$MODEL" > "$T/trunc.gguf"
"$PY" "$SERVE" --model "$T/trunc.gguf" --port 0 > /dev/null 2> "$T/e1"
rc=$?
check '[ $rc -eq 2 ] && grep -q "trunc.gguf" "$T/e1"' "truncated GGUF: exit 2 naming the file (got $rc: $(head -c 200 "$T/e1"))"
if ! "$PY" -c 'import torch.nn.functional as F; assert hasattr(F, "scaled_dot_product_attention")' 2>/dev/null; then
  "$PY" "$SERVE" --model "$MODEL" --attn sdpa > /dev/null 2> "$T/e2"
  rc=$?
  check '[ $rc -eq 2 ] && grep -q "scaled_dot_product_attention" "$T/e2"' "--attn sdpa without SDPA: exit 2 (got $rc)"
fi

# every shipped architecture's forward pass (llama GQA, qwen2, llama MoE, the fragile ones) against the float64
# reference logits of tests/data/models (measured max |diff| 0.9e-5 - 1.5e-5 in fp32; argmax must agree)
"$PY" "$S/tools/torch_server/check_logits.py" --threads 1 --max-abs 1e-3 "$S"/tests/data/models/*.logits.json > "$T/logits" 2>&1
check '[ $? -eq 0 ]' "check_logits: $(cat "$T/logits")"
cat "$T/logits"

# the GGUF reader and tokenizer set-up on corrupted files: clean rejections only
"$PY" "$S/tools/torch_server/fuzz_gguf.py" "$MODEL" 120 1 > "$T/fuzz" 2>&1
check '[ $? -eq 0 ]' "fuzz_gguf: $(tail -5 "$T/fuzz")"
tail -1 "$T/fuzz"

phase "done"
finish
