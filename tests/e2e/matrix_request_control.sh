#!/usr/bin/env bash
# matrix_request_control.sh - a matrix file's request control (issue 37)
# reaches the wire: against a recording server (rec_server.py), each
# configuration's requests carry the top level's system prompt, headers and
# extra body, an explicit configuration's own over them (field by field,
# headers by name: a top-level header it does not name is still sent), a
# product's configurations the top level's; an env:VAR header's value is
# read from the environment and is in no file the matrix leaves; each run's
# decoding record holds its request control.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 is not installed"
rpid=
on_exit() { kill -9 $rpid 2> /dev/null; }
python3 "$S/tests/e2e/rec_server.py" "$T/rec.port" "$T/rec.log" 2> "$T/rec.err" &
rpid=$!
wait_port_file "$T/rec.port" 200 || fail "the recording server did not start: $(cat "$T/rec.err")"

cat > "$T/mx.yaml" << EOF
store: $T/mx.db
suites: [builtin:math]
limit: 2
decoding: {max_tokens: 4}
baseline: a
system_prompt: TOP
headers: {X-Team: top, X-Zone: eu}
extra_body: {top_k: 5}
configs:
  - {label: a, url: "http://127.0.0.1:$PORT/v1", model: ma, api: chat, dims: {m: a}}
  - label: b
    url: "http://127.0.0.1:$PORT/v1"
    model: mb
    api: chat
    dims: {m: b}
    system_prompt: OWN
    headers: {X-Team: own, X-Token: "env:REQCTL_E2E_MX"}
    extra_body: {chat_template_kwargs: {enable_thinking: false}}
EOF
cat > "$T/mxp.yaml" << EOF
store: $T/mxp.db
suites: [builtin:math]
limit: 2
decoding: {max_tokens: 4}
baseline: pa
dimensions: {model: [pa, pb]}
target: "http://127.0.0.1:$PORT/v1?model={model}&api=chat"
label: "{model}"
system_prompt: PRODUCT
headers: {X-Team: product}
extra_body: {repetition_penalty: 1.1}
EOF
: > "$T/rec.log"
REQCTL_E2E_MX=tok-mx-0452 "$D" matrix -c "$T/mx.yaml" > "$T/mx.out" 2> "$T/mx.err"
rc=$?
check '[ $rc = 0 ]' "matrix -c against the recording server failed (rc $rc): $(tail -3 "$T/mx.err")"
"$D" matrix -c "$T/mxp.yaml" > "$T/mxp.out" 2> "$T/mxp.err"
rc=$?
check '[ $rc = 0 ]' "matrix -c (a product) against the recording server failed (rc $rc): $(tail -3 "$T/mxp.err")"
python3 - "$T/rec.log" > "$T/mx.check" 2>&1 << 'EOF'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in r if x["path"].endswith("/chat/completions")]
by = {}
for x in r: by.setdefault(x["body"]["model"], []).append(x)
assert sorted((k, len(v)) for k, v in by.items()) == [("ma", 2), ("mb", 2), ("pa", 2), ("pb", 2)], by.keys()
want = {  # model: system prompt, headers (exactly these X- ones), extra body fields, absent fields
    "ma": ("TOP", {"x-team": "top", "x-zone": "eu"}, {"top_k": 5}, ["chat_template_kwargs"]),
    "mb": ("OWN", {"x-team": "own", "x-zone": "eu", "x-token": "tok-mx-0452"},
           {"chat_template_kwargs": {"enable_thinking": False}}, ["top_k"]),
    "pa": ("PRODUCT", {"x-team": "product"}, {"repetition_penalty": 1.1}, ["top_k"]),
    "pb": ("PRODUCT", {"x-team": "product"}, {"repetition_penalty": 1.1}, ["top_k"]),
}
for m, (sysp, hdr, extra, absent) in want.items():
    for x in by[m]:
        b = x["body"]
        xh = [(k.lower(), v) for k, v in x["headers"] if k.lower().startswith("x-")]
        assert sorted(xh) == sorted(hdr.items()), (m, xh)
        assert b["messages"][0] == {"role": "system", "content": sysp}, (m, b["messages"])
        assert b["messages"][1]["role"] == "user" and len(b["messages"]) == 2, (m, b["messages"])
        for k, v in extra.items(): assert b[k] == v, (m, k, b)
        for k in absent: assert k not in b, (m, k, b)
        assert b["max_tokens"] == 4 and b["stream"] is False, (m, b)
print("ok")
EOF
check 'grep -qx ok "$T/mx.check"' "the matrix's requests are not what its file asks: $(cat "$T/mx.check")"
check '! grep -aq "tok-mx-0452" "$T/mx.db" "$T/mx.out" "$T/mx.err"' "the matrix stored or printed an env: header's value"
dec=$(sql "$T/mx.db" "SELECT decoding FROM runs WHERE label='b'")
check 'printf "%s" "$dec" | grep -q "\"system_prompt\":\"OWN\"" && printf "%s" "$dec" | grep -q "enable_thinking"' \
  "the matrix run's decoding record lacks its request control: $dec"
finish
