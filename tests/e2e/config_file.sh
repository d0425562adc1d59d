#!/usr/bin/env bash
# config_file.sh - one file per comparison or matrix (issue 37):
# 1. the runnable example, examples/serve-vs-serve.yaml: two `driftbench
#    serve` servers started by the file's start: commands, measured, shrunk
#    by flags (--limit, --db): a verdict, the file's labels and budget, the
#    flag's limit, both servers gone;
# 2. flags override the file: --limit, --max-tokens, --suite (replaces the
#    file's suites), --baseline-label, --format, -o over an embedded pair;
# 3. each kind of error is exit 2 naming file:line and the key: syntax,
#    unknown key, wrong type, duplicate key, missing url; a JSON file is
#    read too (no line);
# 4. matrix -c: --list from a YAML matrix file, a line in its errors,
#    --spec with -c refused, --spec FILE.yaml read as YAML.
. "$(dirname "$0")/lib.sh"

cd "$S" || fail "cd $S"
export PATH="$(dirname "$D"):$PATH" # the example's start: commands run `driftbench serve`

# 1. the runnable example
"$D" measure -c examples/serve-vs-serve.yaml --limit 3 --db "$T/svs.db" --format json -o "$T/svs.json" \
  2> "$T/svs.err"; rc=$?
check 'python3 - "$T/svs.json" <<PY
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] in ("deploy", "block", "inconclusive"), r["verdict"]
assert r["baseline"]["label"] == "ref" and r["target"]["label"] == "int4", (r["baseline"]["label"], r["target"]["label"])
w = [x for x in r["decision"]["workloads"] if x["workload"] == "math"][0]
assert w["n"] == 3, w        # --limit 3 over the limit of the file (12)
assert abs(w["budget"] - 0.10) < 1e-12, w   # budgets of the file: math 10
assert r["target"]["config"]["precision"] == "int4"
PY' "the report: verdict, the file's labels and budget, the flag's limit"
check '[ "$(grep -c "server ready on port" "$T/svs.err")" = 2 ]' "both servers started by the file's start: commands"
# this run's own servers, by their ports (other tests may serve the same model and profile at the same time)
ports=$(sed -n 's/.*server ready on port \([0-9]*\).*/\1/p' "$T/svs.err" | tr '\n' ' ')
check '[ -n "$ports" ] && ( for p in $ports; do ! pgrep -f -- "--port $p --lifetime" > /dev/null || exit 1; done )' \
  "no server left running (ports $ports)"

# 2. flags override the file
cat > "$T/e.yaml" <<YAML
store: $T/e.db
suites: [builtin:math, builtin:chat]
limit: 3
decoding: {max_tokens: 24}
budgets: {chat: none}          # no embedder here: chat is not gated
targets:
  baseline: {target: 'embedded:models/qwen2-7m.gguf?profile=ref', label: base}
  target: {target: 'embedded:models/qwen2-7m.gguf?profile=cpu-bf16', label: cand}
report: {format: markdown, output: $T/e.md}
YAML
"$D" measure -c "$T/e.yaml" > /dev/null 2> "$T/e1.err"; rc=$?
check '[ $rc -ne 2 ] && grep -q "^starting run .base.: 6 prompts" "$T/e1.err"' \
  "the file alone: its limit (3) over its two suites (rc $rc: $(tail -2 "$T/e1.err"))"
check 'grep -q "^| " "$T/e.md"' "the file's report: markdown into its output"
check '[ "$(sqlite3 "$T/e.db" "SELECT json_extract(decoding, \"\$.max_tokens\") FROM runs WHERE label = \"base\"" 2>/dev/null)" = 24 ] ||
       sqlite3 "$T/e.db" "SELECT * FROM runs WHERE label = \"base\"" | grep -q "\"max_tokens\":24"' "the file's max_tokens (24) recorded"
"$D" measure -c "$T/e.yaml" --limit 2 --max-tokens 8 --suite builtin:math --baseline-label base2 --format json \
  -o "$T/e2.json" --db "$T/e2.db" 2> "$T/e2.err"; rc=$?
check '[ $rc -ne 2 ] && grep -q "^starting run .base2.: 2 prompts" "$T/e2.err"' \
  "--limit 2 --suite builtin:math --baseline-label base2 override (rc $rc: $(tail -2 "$T/e2.err"))"
check '[ -s "$T/e2.json" ] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$T/e2.json"' "--format json -o over the file's report"
check '[ -f "$T/e2.db" ] && sqlite3 "$T/e2.db" "SELECT * FROM runs WHERE label = \"base2\"" | grep -q "\"max_tokens\":8"' \
  "--db and --max-tokens over the file's store and decoding"
check '! grep -q "^starting run .cand.: 4 prompts" "$T/e2.err"' "the file's suites replaced by --suite"

# 3. errors: exit 2, file:line, the key
err_case() { # NAME EXPECTED-TEXT YAML
  local name=$1 want=$2
  printf '%s\n' "$3" > "$T/$name.yaml"
  "$D" measure -c "$T/$name.yaml" > /dev/null 2> "$T/$name.err"; rc=$?
  check '[ $rc -eq 2 ] && grep -qF -- "$want" "$T/$name.err"' "$name: exit 2 with '$want' (rc $rc: $(cat "$T/$name.err"))"
}
err_case syntax "syntax.yaml:4:9: did not find expected" $'suites: [builtin:math]\ntargets:\n  baseline: {url: http://x/v1\n  target: 1'
err_case unknown "unknown.yaml:5: targets.baseline.hedaers: unknown key (known: url, model," \
  $'suites: [builtin:math]\ntargets:\n  baseline:\n    url: http://127.0.0.1:1/v1\n    hedaers: {X-A: b}'
err_case type "type.yaml:2: decoding.max_tokens: must be an integer in [1, 1000000]" \
  $'suites: [builtin:math]\ndecoding: {max_tokens: many}'
err_case dup "dup.yaml:3:1: key 'limit' is given twice (first on line 1)" $'limit: 3\nsuites: [builtin:math]\nlimit: 4'
err_case nourl "nourl.yaml:4: targets.target.model: needs a url (missing url)" \
  $'suites: [builtin:math]\ntargets:\n  target:\n    model: m'
err_case keyenv "keyenv.yaml:2: targets.baseline.api_key_env: must be the NAME" \
  $'targets:\n  baseline: {url: "http://x/v1", api_key_env: "sk-123"}'
check '! grep -q "sk-123" "$T/keyenv.err"' "a key given as api_key_env is not echoed"
printf '{"suites": ["builtin:math"], "limmit": 3}\n' > "$T/j.json"
"$D" measure -c "$T/j.json" > /dev/null 2> "$T/j.err"; rc=$?
check '[ $rc -eq 2 ] && grep -qF "j.json: limmit: unknown key" "$T/j.err"' "a .json file is read as JSON (rc $rc: $(cat "$T/j.err"))"
"$D" measure -c "$T/missing.yaml" > /dev/null 2> "$T/m.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "missing.yaml" "$T/m.err"' "a missing file: exit 2 naming it"

# 4. matrix -c
cat > "$T/m.yaml" <<YAML
store: $T/m.db
parallel: 1
suites: [builtin:math]
limit: 2
baseline: ref
configs:
  - {label: ref, target: 'embedded:models/qwen2-7m.gguf?profile=ref', dims: {precision: f32}}
  - label: served
    url: http://127.0.0.1:{port}/v1
    model: qwen2-7m
    server: {start: 'driftbench serve --model models/qwen2-7m.gguf --profile cpu-bf16 --port {port}'}
    dims: {precision: bf16}
YAML
"$D" matrix -c "$T/m.yaml" --list > "$T/ml.out" 2> "$T/ml.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "served.*http://127.0.0.1:{port}/v1?model=qwen2-7m" "$T/ml.out"' \
  "matrix -c --list: the configurations, target fields made a spec (rc $rc: $(cat "$T/ml.err"))"
"$D" matrix -c "$T/m.yaml" --spec "$T/m.yaml" --list > /dev/null 2> "$T/ms.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "give one" "$T/ms.err"' "--spec with -c refused"
sed 's/^store:.*//; s/^parallel:.*//' "$T/m.yaml" > "$T/spec.yaml"
"$D" matrix --spec "$T/spec.yaml" --list > "$T/sl.out" 2> "$T/sl.err"; rc=$?
check '[ $rc -eq 0 ] && [ "$(wc -l < "$T/sl.out")" = 2 ]' "matrix --spec FILE.yaml (rc $rc: $(cat "$T/sl.err"))"
sed 's/    model: qwen2-7m/    modle: qwen2-7m/' "$T/m.yaml" > "$T/mbad.yaml"
"$D" matrix -c "$T/mbad.yaml" --list > /dev/null 2> "$T/mb.err"; rc=$?
check '[ $rc -eq 2 ] && grep -qF "mbad.yaml:10: configs[1].modle: unknown key" "$T/mb.err"' \
  "a matrix file's error names its line (rc $rc: $(cat "$T/mb.err"))"
"$D" matrix -c "$T/m.yaml" > /dev/null 2> "$T/mr.err"; rc=$?
check '[ $rc -eq 0 ] && [ "$(sqlite3 "$T/m.db" "SELECT count(*) FROM runs")" = 2 ]' \
  "matrix -c runs both configurations into the file's store (rc $rc: $(tail -3 "$T/mr.err"))"

finish
