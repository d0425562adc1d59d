#!/usr/bin/env bash
# divergence_http_chat.sh - token-level divergence of api=chat HTTP runs
# (issue 37): the client sends the run's messages and the baseline's answer
# as a last assistant message left open (vLLM's continue_final_message,
# add_generation_prompt false) with prompt_logprobs, and `driftbench serve`
# renders the turns with the model's template. Two servers of the shipped
# qwen2-7m (profiles ref and cpu-bf16) and the same two profiles embedded
# with api=chat, 2 math + 2 chat prompts, 24 tokens:
#   - `serve --profile cpu-bf16` says profile cpu-bf16 in /v1/driftbench/info
#     (it said "custom": --threads renamed it);
#   - the HTTP chat run against the embedded chat run of the same profile:
#     exactly 0 KL, every top-1 the same, every answer token paired (the
#     server's chat tokens are the embedded target's);
#   - ref against bf16 over HTTP matches ref against bf16 embedded within
#     the tolerance the completions path states (tests/e2e/divergence_http.sh):
#     a lower bound of the full KL and at least 90% of it, the forced
#     tokens' perplexities and dp to 1e-9, the top-1 agreement to one
#     position; nonzero;
#   - mixed pairs give the HTTP pair's figures exactly;
#   - compare --kl over the chat runs reports the same mean KL and the method;
#     report --kl (HTTP chat baseline) draws each configuration with the
#     mean KL divergence gives its pair, none left out;
#   - --http-logprobs echo on a chat stack: exit 2, saying echo is a
#     completions field;
#   - with a system prompt (--system) on both sides, the HTTP chat run
#     against the embedded one: exactly 0 again, and the embedded run's
#     answers forced under the system prompt its record holds give back the
#     logprobs it stored (the perplexity to 1e-9): the prompt is re-created.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 is not installed"
M=$S/models/qwen2-7m.gguf
[ -f "$M" ] || skip_all "no $M"
DB=$T/s.db
R=(--db "$DB" --suite builtin:math --suite builtin:chat --limit 2 --max-tokens 24)

start_serve ref ref
start_serve bf16 cpu-bf16
HREF="http://127.0.0.1:$PORT_ref/v1?model=qwen2-7m&api=chat"
HBF="http://127.0.0.1:$PORT_bf16/v1?model=qwen2-7m&api=chat"

# ---- serve reports the named profile ----
info=$(curl -s --noproxy '*' "http://127.0.0.1:$PORT_bf16/v1/driftbench/info")
check 'python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d[\"profile\"]==\"cpu-bf16\", d" "$info"' \
  "serve --profile cpu-bf16 --threads 1: /v1/driftbench/info names the profile: $info"

$D --quiet run "${R[@]}" --label emb_ref --target "embedded:$M?profile=ref&api=chat" || bad "run emb_ref"
$D --quiet run "${R[@]}" --label emb_bf16 --target "embedded:$M?profile=cpu-bf16&api=chat" || bad "run emb_bf16"
$D --quiet run "${R[@]}" --label http_ref --target "$HREF" || bad "run http_ref"
$D --quiet run "${R[@]}" --label http_bf16 --target "$HBF" || bad "run http_bf16"

# ---- the same profile over HTTP chat and embedded chat: exactly 0 ----
div same http_ref emb_ref
check '[ $rc -eq 0 ] && divergence_check same-zero "$T/same.json" chat' \
  "chat: HTTP ref vs embedded ref: exactly 0, every token paired (rc $rc): $(head -c 700 "$T/same.json") $(cat "$T/same.err")"

# ---- ref vs bf16: HTTP chat against embedded chat ----
div emb emb_ref emb_bf16
div http http_ref http_bf16
check '[ $rc -eq 0 ] && divergence_check tolerance "$T/emb.json" "$T/http.json" 0 "chat ref vs bf16"' \
  "chat ref vs bf16: HTTP within the tolerance of embedded (rc $rc): $(head -c 400 "$T/http.json") $(cat "$T/http.err")"

# ---- mixed pairs: the HTTP pair's figures exactly ----
div mix1 emb_ref http_bf16
r1=$rc
div mix2 http_ref emb_bf16
check '[ $r1 -eq 0 ] && [ $rc -eq 0 ] && divergence_check mixed "$T/http.json" "$T/mix1.json" "$T/mix2.json"' \
  "chat: embedded ref vs HTTP bf16 and HTTP ref vs embedded bf16 = HTTP vs HTTP (rc $r1 $rc): $(cat "$T/mix1.err" "$T/mix2.err")"

# ---- echo is a completions field ----
div echo http_ref http_bf16 --http-logprobs echo
check '[ $rc -eq 2 ] && grep -q "echo+logprobs is a completions field" "$T/echo.err"' \
  "chat with --http-logprobs echo: exit 2 saying why (rc $rc): $(cat "$T/echo.err")"

# ---- compare --kl over the chat runs ----
$D --quiet score --db "$DB" 2> /dev/null || bad "score"
"$D" compare --db "$DB" --baseline http_ref --target http_bf16 --budget math=none,chat=none --kl --format json \
  > "$T/cmp.json" 2> "$T/cmp.err"; rc=$?
check '[ $rc -eq 0 ] && divergence_check compare-kl "$T/cmp.json" "$T/http.json"' \
  "compare --kl over chat HTTP runs: the same mean KL, the method named (rc $rc): $(cat "$T/cmp.err")"
# report --kl: every configuration forced against the HTTP chat baseline (--kl 2: every prompt)
"$D" --quiet report --db "$DB" --baseline http_ref --html "$T/kl.html" --kl 2 2> "$T/kl.err"; rc=$?
check '[ $rc -eq 0 ] && divergence_check report-kl "$T/kl.html" http_bf16="$T/http.json" emb_bf16="$T/mix2.json" emb_ref=0' \
  "report --kl over chat HTTP runs: each configuration's mean KL as divergence gives it (rc $rc): $(cat "$T/kl.err")"

# ---- a system prompt: re-created for every stack ----
SYS="You are terse. Answer in one line."
$D --quiet run "${R[@]}" --label emb_sys --target "embedded:$M?profile=ref&api=chat" --system "$SYS" --logprobs 1 || bad "run emb_sys"
$D --quiet run "${R[@]}" --label http_sys --target "$HREF" --system "$SYS" || bad "run http_sys"
div sys http_sys emb_sys
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); o=d[\"overall\"]
assert d[\"skipped\"]==0 and o[\"positions\"]==sum(p[\"answer_tokens\"] for p in d[\"prompts\"])>0, d
assert o[\"kl_max\"]==0 and o[\"same_top\"]==1, o
assert all(p[\"unaligned\"]==0 for p in d[\"prompts\"]), d[\"prompts\"]
" "$T/sys.json"' "chat with --system: HTTP ref vs embedded ref: exactly 0 (rc $rc): $(head -c 500 "$T/sys.json") $(cat "$T/sys.err")"
# the system prompt is in what is forced: the embedded run's own answers (their ids, from the stored
# logprobs) forced under it give back the logprobs the run stored, so the perplexity of them all
div sysemb emb_sys http_sys
divergence_check stored-logprobs "$DB" emb_sys > "$T/sys.lp" 2> "$T/lp.err" || bad "reading the stored logprobs: $(cat "$T/lp.err")"
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
assert all(p[\"tokens_from\"]==\"logprobs\" for p in d[\"prompts\"]) and d[\"overall\"][\"kl_max\"]==0, d
" "$T/sysemb.json" && divergence_check forced-ppl "$T/sysemb.json" "$T/sys.lp"' \
  "chat with --system: the embedded run's answers forced under its system prompt give its stored logprobs (rc $rc): $(head -c 300 "$T/sysemb.json") $(cat "$T/sysemb.err")"

finish
