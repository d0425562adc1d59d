#!/usr/bin/env bash
# suite_formats.sh - suites in the forms users have, end to end (src/suite/loaders.c):
#   1. a 3-line chat messages JSONL (multi-turn, references, a spec workload for the line without one) runs
#      on the embedded tiny model (api=completions: the turns rendered as "System:/User:/Assistant:" text);
#      three answers are stored, the prompts keep their turns, the run records messages/completions/v1;
#   2. an OpenAI batch API input file runs against the fake OpenAI server with api=chat: the request the
#      server got carries the prompt's turns as "messages" (system/user/assistant kept), and the answers
#      are stored under the batch's custom_ids;
#      on the embedded api=chat, a one-user-turn prompt is answered and a multi-turn one fails its request;
#   3. a messages file whose line 2 has no workload and no ?workload= is refused: exit 2, file:line named.
. "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip_all "no sqlite3"
command -v curl >/dev/null || skip_all "no curl"
M=$S/tests/data/models/tiny-qwen2-f16.gguf
cd "$T" || fail "cd $T"

cat > chat.jsonl <<'J'
{"id":"greet","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi."},{"role":"assistant","content":"Hi."},{"role":"user","content":"Now say bye."}],"reference":"Bye.","workload":"chat"}
{"id":"sum","messages":[{"role":"user","content":"What is 2+3? End with #### N."}],"answer":5,"workload":"math"}
{"id":"colour","messages":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Red."},{"role":"user","content":"Another one."}]}
J
cat > batch.jsonl <<'J'
{"custom_id":"req-1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"Capital of France?"}],"max_tokens":50}}
{"custom_id":"req-2","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"Hello! How can I help?"},{"role":"user","content":"Tell me a joke."}]}}
J

# ---- 1. messages JSONL on the embedded model
"$D" --quiet run --db e.db --label tiny --target "embedded:$M?profile=cpu-f32&threads=1" \
  --suite 'chat.jsonl?workload=chat' --max-tokens 4 > r1.out 2> r1.err; rc=$?
check '[ $rc -eq 0 ]' "messages JSONL runs on the embedded model (rc $rc: $(tail -2 r1.err))"
n=$(sql e.db "select count(*) from responses where failed = 0 and text is not null")
check '[ "$n" = 3 ]' "three answers stored ($n)"
ids=$(sql e.db "select group_concat(prompt_id, ' ') from (select prompt_id from prompts order by prompt_id)")
check '[ "$ids" = "colour greet sum" ]' "prompt ids from the records ('$ids')"
turns=$(sql e.db "select count(*) from prompts where input like '%\"role\":\"assistant\"%' and input like '%\"role\":\"system\"%'")
check '[ "$turns" = 1 ]' "the multi-turn prompt keeps its system and assistant turns in the store ($turns)"
wl=$(sql e.db "select group_concat(prompt_id || '=' || workload, ' ') from (select * from prompts order by prompt_id)")
check 'echo "$wl" | grep -q "sum=math" && echo "$wl" | grep -q "colour=chat"' "workloads: record, else the spec ($wl)"
check 'sqlite3 e.db .dump | grep -q "messages/completions/v1"' "the run records the template messages/completions/v1"

# embedded api=chat: a one-user-turn prompt goes through the model's template, a multi-turn one fails its
# request with a clear message (the built-in template takes one user message)
"$D" --quiet run --db c.db --label tc --target "embedded:$M?profile=cpu-f32&threads=1&api=chat" \
  --suite 'chat.jsonl?workload=chat' --max-tokens 4 > r4.out 2> r4.err; rc=$?
ok1=$(sql c.db "select count(*) from responses r join prompts p on p.id = r.prompt_rowid where r.failed = 0 and p.prompt_id = 'sum'")
bad2=$(sql c.db "select count(*) from responses where failed = 1 and error like '%takes one user message%'")
check '[ "$ok1" = 1 ] && [ "$bad2" = 2 ]' "embedded chat: one-turn answered ($ok1), multi-turn refused per request ($bad2; rc $rc)"

# ---- 2. batch input over HTTP chat: the turns reach the server as messages
start_server_text 'default | text | OK.\n'
"$D" --quiet run --db h.db --label fake --target "http://127.0.0.1:$PORT/v1?model=m&api=chat" \
  --suite 'batch.jsonl?workload=chat' --concurrency 1 > r2.out 2> r2.err; rc=$?
check '[ $rc -eq 0 ]' "batch input runs over HTTP chat (rc $rc: $(tail -2 r2.err))"
n=$(sql h.db "select count(*) from responses r join prompts p on p.id = r.prompt_rowid where r.failed = 0 and r.text = 'OK.' and p.prompt_id in ('req-1','req-2')")
check '[ "$n" = 2 ]' "two answers stored ($n)"
last=$(curl -s "http://127.0.0.1:$PORT/last")
roles=$(printf '%s' "$last" | python3 -c 'import json,sys; b=json.load(sys.stdin); print(" ".join(m["role"] for m in b["messages"]))' 2>/dev/null)
check '[ "$roles" = "system user" ] || [ "$roles" = "user assistant user" ]' "the chat request carries the turns as messages (roles: '$roles'; body ${last:0:200})"
check '[ -n "$last" ] && ! printf "%s" "$last" | grep -q gpt-4o-mini' "the batch body's model is not sent (decoding and model come from the run)"

# ---- 3. no workload anywhere: exit 2 naming file and line
head -2 chat.jsonl | sed 's/,"workload":"math"//' > nowl.jsonl
"$D" --quiet run --db x.db --label x --target "embedded:$M" --suite nowl.jsonl > r3.out 2> r3.err; rc=$?
check '[ $rc -eq 2 ] && grep -q "nowl.jsonl:2: field \"workload\" missing" r3.err' "no workload: exit 2 with file:line ($rc: $(cat r3.err))"
finish
