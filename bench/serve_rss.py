#!/usr/bin/env python3
"""serve_rss.py - does `driftbench serve` keep memory per request?

Starts `driftbench serve` (--port 0) on a small model, sends N requests one
after another (new connection each, alternating /v1/completions and
ten kinds in turn: completions plain, with logprobs, streamed, with
prompt_logprobs, with echo (max_tokens 0), sampled with n=2 and a stop string; chat plain and
streamed with top_logprobs; embeddings; a bad request refused
with a 4xx (--kinds picks some; kind 10, a client that hangs up mid-stream,
only when asked); each prompt distinct and of varying length, --max-tokens T,
--concurrency clients at a time), and reads the
server's VmRSS from /proc/PID/status before the first request and after every
--every requests. Prints one line per sample and the growth per request over
the second half (after warm-up: the allocator's arenas and the KV pool
reach their size in the first requests).

  bench/serve_rss.py [--bin build/driftbench] [--model tests/data/models/tiny-qwen2-f16.gguf]
                     [--requests 2000] [--every 100] [--max-tokens 8] [--concurrency 1]
                     [--max-batch 8] [--json OUT]
Exit 0 always when the server ran (the figure is the output); 2 on a
server that does not start or a request that fails.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/driftbench")
    ap.add_argument("--model", default="tests/data/models/tiny-qwen2-f16.gguf")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--kinds", default="0,1,2,3,4,5,6,7,8,9",
                    help="the request kinds to send, in turn (0-9, the mix above; 10: a streamed "
                         "request whose client hangs up after the first event)")
    ap.add_argument("--json")
    a = ap.parse_args()
    srv = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", "0", "--threads", "1",
                            "--max-batch", str(a.max_batch)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = None
    t0 = time.time()
    while time.time() - t0 < 60:
        line = srv.stdout.readline()
        if not line:
            break
        if line.startswith("PORT "):
            port = int(line.split()[1])
            break
    if port is None:
        srv.kill()
        print("serve_rss: the server did not print its port", file=sys.stderr)
        return 2
    base = f"http://127.0.0.1:{port}"
    kinds = [int(x) for x in a.kinds.split(",")]
    samples = [(0, rss_kb(srv.pid))]

    def one(i):
        """Request i of the mix: ten kinds in turn (the reply paths serve has)."""
        k = kinds[i % len(kinds)]
        url = base + "/v1/completions"
        pr = f"Question {i}: what is {i} plus {i % 7}?" + " and" * (i % 40)
        body = {"prompt": pr, "max_tokens": a.max_tokens, "temperature": 0}
        if k == 1:
            url = base + "/v1/chat/completions"
            body = {"messages": [{"role": "user", "content": f"Say {i} in words."}],
                    "max_tokens": a.max_tokens, "temperature": 0}
        elif k == 2:
            body["logprobs"] = 3
        elif k == 3:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        elif k == 4:  # a bad request: the refusal path
            body = {"prompt": 7, "max_tokens": "x"}
        elif k == 5:
            body.update({"prompt_logprobs": 2, "max_tokens": 1})
        elif k == 6:
            body.update({"echo": True, "logprobs": 1, "max_tokens": 0})
        elif k == 7:
            body.update({"temperature": 0.8, "seed": i, "n": 2, "stop": ["\n\n"]})
        elif k == 8:
            url = base + "/v1/embeddings"
            body = {"input": [pr, pr[::-1]]}
        elif k == 9:
            url = base + "/v1/chat/completions"
            body = {"messages": [{"role": "user", "content": f"Count to {i % 9}."}],
                    "max_tokens": a.max_tokens, "stream": True, "logprobs": True, "top_logprobs": 2}
        if k == 10:  # a client that leaves mid-answer: the cancel path
            body.update({"stream": True, "max_tokens": 64})
            req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                r.readline()  # the first event, then hang up
            return True
        req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()
            return k != 4 or (print(f"request {i}: a bad request answered 200", file=sys.stderr) and False)
        except urllib.error.HTTPError as e:
            msg = e.read()[:200]
            if k == 4 and 400 <= e.code < 500:
                return True
            print(f"request {i} (kind {k}): HTTP {e.code} {msg!r}", file=sys.stderr)
            return False

    try:
        with ThreadPoolExecutor(a.concurrency) as ex:
            for start in range(0, a.requests, a.every):
                ok = list(ex.map(one, range(start, min(start + a.every, a.requests))))
                if not all(ok):
                    raise RuntimeError(f"{ok.count(False)} unexpected replies in requests {start}..")
                samples.append((min(start + a.every, a.requests), rss_kb(srv.pid)))
    except Exception as e:  # a failed request is a failed measurement
        print(f"serve_rss: {e}", file=sys.stderr)
        srv.terminate()
        return 2
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
    for n, kb in samples:
        print(f"requests {n:6d}  VmRSS {kb:8d} kB")
    half = [s for s in samples if s[0] >= a.requests // 2]
    grow = (half[-1][1] - half[0][1]) / max(half[-1][0] - half[0][0], 1)
    print(f"growth over requests {half[0][0]}..{half[-1][0]}: {grow * 1024:.1f} bytes/request "
          f"({half[-1][1] - half[0][1]} kB); first {samples[1][1] - samples[0][1]} kB by request {samples[1][0]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"samples": samples, "bytes_per_request_second_half": grow * 1024}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
