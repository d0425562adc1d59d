#!/usr/bin/python3
"""Writes the lm-evaluation-harness fixtures of tests/data/import/ from real
generations of two OpenAI-compatible servers (llama.cpp's llama-server over
models/qwen2-7m.gguf and over its Q4_0 quantisation), row by row in the
format lm-eval's --log_samples writes (see README.md here for the source
files and version). Not part of the build: run by hand to remake them.

usage: make_lmeval_fixtures.py MATH.jsonl CODE.jsonl URL_A URL_B OUTDIR
(MATH/CODE: `driftbench suites export builtin:math|code`)."""
import hashlib, json, os, re, subprocess, sys, tempfile, urllib.request

GSM_UNTIL = ["Question:", "</s>", "<|im_end|>"]
HE_UNTIL = ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]


def sha(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def complete(url, prompt, until, max_tokens):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 1234,
                       "stop": until}).encode()
    req = urllib.request.Request(url + "/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["choices"][0]["text"]


def strict(resp):  # gsm8k "strict-match": regex "#### (\-?[0-9\.\,]+)", take_first
    m = re.findall(r"#### (\-?[0-9\.\,]+)", resp)
    return m[0] if m else "[invalid]"


def flexible(resp):  # gsm8k "flexible-extract": "(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select -1
    m = re.findall(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", resp)
    if not m:
        return "[invalid]"
    last = m[-1]
    return [x for x in last if x][0] if any(last) else "[invalid]"


def exact_match(pred, target):  # exact_match with gsm8k's regexes_to_ignore, ignore_case
    for rx in [",", r"\$", r"(?s).*#### ", r"\.$"]:
        pred = re.sub(rx, "", pred)
        target = re.sub(rx, "", target)
    return 1.0 if pred.lower() == target.lower() else 0.0


def doc_hash(doc):
    return sha(json.dumps(doc, indent=2, ensure_ascii=False))


def gsm8k(math, url, old):
    rows = {"strict-match": [], "flexible-extract": []}
    for i, rec in enumerate(math):
        doc = {"question": rec["input"], "answer": rec["reference"]["solution"]}
        ctx = "Question: " + doc["question"] + "\nAnswer:"
        kw = {"until": GSM_UNTIL, "do_sample": False, "temperature": 0.0}
        resp = complete(url, ctx, GSM_UNTIL, 256)
        for name, f in (("strict-match", strict), ("flexible-extract", flexible)):
            filt = f(resp)
            row = {"doc_id": i, "doc": doc, "target": doc["answer"]}
            if old:  # lm-eval 0.4.0: the request list as written, no filter / metrics / hashes
                row.update({"arguments": [[ctx, kw]], "resps": [[resp]], "filtered_resps": [filt],
                            "exact_match": exact_match(filt, doc["answer"])})
            else:
                row.update({"arguments": {"gen_args_0": {"arg_0": ctx, "arg_1": kw}}, "resps": [[resp]],
                            "filtered_resps": [filt], "filter": name, "metrics": ["exact_match"],
                            "doc_hash": doc_hash(doc), "prompt_hash": sha(ctx), "target_hash": sha(doc["answer"]),
                            "exact_match": exact_match(filt, doc["answer"])})
            rows[name].append(row)
    return rows["strict-match"] + rows["flexible-extract"]  # one block per filter, as evaluate() loops


def passes(program):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(program)
    try:
        return subprocess.run(["/usr/bin/python3", "-I", f.name], capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False
    finally:
        os.unlink(f.name)


def humaneval(code, url):
    rows = []
    for i, rec in enumerate(code):
        r = rec["reference"]
        doc = {"task_id": "HumanEval/%d" % i, "prompt": r["prompt"], "canonical_solution": r["canonical_solution"],
               "test": r["test"], "entry_point": r["entry_point"]}
        kw = {"until": HE_UNTIL, "max_gen_toks": 1024, "do_sample": False}
        resp = complete(url, doc["prompt"], HE_UNTIL, 256)
        full = doc["prompt"] + resp  # the "create_test" filter: prompt + completion
        ok = passes(full + "\n" + doc["test"] + "\n" + "check(%s)\n" % doc["entry_point"])
        target = doc["test"] + "\n" + "check(%s)" % doc["entry_point"]
        rows.append({"doc_id": i, "doc": doc, "target": target,
                     "arguments": {"gen_args_0": {"arg_0": doc["prompt"], "arg_1": kw}}, "resps": [[resp]],
                     "filtered_resps": [[full]], "filter": "create_test", "metrics": ["pass@1"],
                     "doc_hash": doc_hash(doc), "prompt_hash": sha(doc["prompt"]), "target_hash": sha(target),
                     "pass@1": 1.0 if ok else 0.0})
    return rows


def write(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    math = [json.loads(l) for l in open(sys.argv[1])]
    code = [json.loads(l) for l in open(sys.argv[2])]
    out = sys.argv[5]
    date = "2026-12-02T05-40-00.000000"
    for tag, url in (("qwen2-7m-f16", sys.argv[3]), ("qwen2-7m-q4_0", sys.argv[4])):
        write(f"{out}/lmeval/{tag}/samples_gsm8k_{date}.jsonl", gsm8k(math, url, False))
        write(f"{out}/lmeval/{tag}/samples_humaneval_{date}.jsonl", humaneval(code, url))
    write(f"{out}/lmeval/qwen2-7m-f16-v0.4.0/samples_gsm8k_{date}.jsonl", gsm8k(math, sys.argv[3], True))


main()
