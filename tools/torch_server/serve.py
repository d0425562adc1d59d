#!/usr/bin/env python3
"""serve.py - an OpenAI-compatible server that runs a GGUF model (models/*.gguf) in PyTorch.

DriftBench's second real framework: the same weights as the embedded engine, run by PyTorch's kernels, so
`driftbench measure --baseline embedded:M.gguf?profile=ref --target http://127.0.0.1:PORT/v1?model=M` measures
framework drift (issue 24). Standard library HTTP (http.server, one thread per connection) and PyTorch (1.13 as
Debian ships it, up to 2.x with CUDA); nothing else.

  /usr/bin/python3 tools/torch_server/serve.py --model models/qwen2-7m.gguf --port 0
  -> prints "listening on http://127.0.0.1:PORT" once the model is loaded and a first forward has run.

Design
- gguf_reader.py reads the file itself (header, metadata, tensor infos; F32/F16/BF16 and the Q8_0, Q4_0/1,
  Q5_0/1, Q4_K, Q5_K, Q6_K blocks, dequantised to float32, then cast to --dtype).
- tokenizer.py is the GGUF's byte-level BPE and chat template, id for id as the engine (src/model/tokenizer.c,
  model_text.c): completions get the raw prompt (BOS by the model's default, special texts not parsed); chat
  renders the messages in the model's template (markers parsed, contents never).
- model.py is the forward pass (llama, llama GQA, qwen2, llama MoE) with a KV cache and padded batches.
- Generation follows src/model/generate.c: stop at an end-of-generation token (not counted, not in the text),
  a stop string (text cut before it), max_tokens, or the context; finish_reason "stop" / "length". Sampling is
  sampler.c's (temperature 0 = argmax, lowest id on ties; otherwise softmax in float64, top-k, top-p, one
  xoshiro256** draw seeded with splitmix64(seed)), so a given seed gives the same answer every time, and the
  engine's answer wherever the logits pick the same token. Logprobs: log-softmax of the raw logits (float64),
  top k <= 20, as the engine reports them.
- Requests go through one scheduler thread (the model is not shared between threads). --batch 1 runs them one
  at a time; --batch N takes up to N requests that arrive within --batch-wait-ms of each other, left-pads
  their prompts to a common length and decodes them together (attention mask per row, positions per row;
  greedy and seeded rows alike, each with its own parameters); finished rows leave the batch.
- Prompt logprobs (vLLM's extension, what `driftbench divergence` reads over HTTP; docs/divergence-http.md):
  "prompt_logprobs": K (0..20) on completions (choices[0].prompt_logprobs and prompt_token_ids) and chat (at the
  top level, as vLLM's chat reply), each prompt token after the first a dict id -> {logprob, rank,
  decoded_token}, the prompt's own token first, then the top K (lowest id first on ties); the log-softmax in
  float64 of the float32 logits that predict it, as the engine's. Chat takes vLLM's add_generation_prompt
  (default true) and continue_final_message (the last, assistant, message left open). Completions take
  OpenAI's "echo": true (the prompt before the text; with "logprobs": K the prompt's tokens first, with
  text_offset in code points). max_tokens 0 scores the prompt and generates nothing.
- Bad requests (malformed JSON, missing or mistyped fields, unknown model, n > 1, stream, oversize body, prompt
  longer than the context) get a 4xx with OpenAI's error object {"error": {"message", "type", "param", "code"}};
  an internal failure is a 500 with the same shape; the server keeps running.

Knobs (all reported by GET /health and in /v1/models' "meta", so a run can record them):
  --dtype fp32|bf16|fp16     weights and activations (RMSNorm and the math softmax in fp32, logits fp32)
  --tf32 on|off              TF32 for float32 matmuls on CUDA (cuda.matmul.fp32_precision "tf32" / "ieee" where
                             torch has it, else allow_tf32; cudnn likewise); no effect on the CPU; default off
  --attn math|sdpa           explicit matmul + masked softmax, or F.scaled_dot_product_attention (torch >= 2.0;
                             asking for it on an older torch is a startup error, exit 2)
  --sdpa-backend auto|flash|efficient|math   pin SDPA's backend (torch >= 2.0; flash takes no mask, so it needs
                             --batch 1 and an unchunked prefill)
  --batch N                  1 = one request at a time; N > 1 = padded batches of up to N concurrent requests
  --batch-wait-ms MS         how long the scheduler waits for companions of a first request (default 5)
  --prefill-chunk N          prompt columns per prefill forward (default 512; 0 = the whole prompt at once,
                             the default and the only choice with --sdpa-backend flash)
  --device cpu|cuda          --threads N (torch.set_num_threads; 0 = torch's default)
  --model PATH               --name NAME (served model name; default the file's stem)
  --seed S                   seed of requests that carry none (a per-server counter is added)
  --host H --port P          P = 0: a free port, printed in the "listening on" line
Exit codes: 0 on SIGINT/SIGTERM, 2 on a bad flag or a model that cannot be loaded or run.
"""
import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MAX_BODY = 8 << 20        # request bytes
MAX_STOP = 16             # stop strings per request
MAX_STOP_LEN = 1024       # bytes per stop string
MAX_TOP_LOGPROBS = 20
MAX_MESSAGES = 1024


class ApiError(Exception):
    def __init__(self, status, message, param=None, code=None, etype="invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.etype = status, message, param, code, etype

    def body(self):
        return {"error": {"message": self.message, "type": self.etype, "param": self.param, "code": self.code}}


# ------------------------------------------------------------------ sampling (src/model/sampler.c)
M64 = (1 << 64) - 1


class Rng:
    """util_rng: xoshiro256** seeded by splitmix64."""

    def __init__(self, seed):
        seed &= M64
        self.s = []
        for _ in range(4):
            seed = (seed + 0x9E3779B97F4A7C15) & M64
            z = seed
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    def next(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next() >> 11) * (1.0 / (1 << 53))


def pick(np, lg, temperature, top_k, top_p, rng):
    """samp_pick: the token id chosen from float32 logits lg."""
    if temperature <= 0:
        return int(np.argmax(lg))
    x = lg.astype(np.float64)
    mx = x[int(np.argmax(x))]
    p = np.exp((x - mx) / temperature)
    p = p / np.cumsum(p)[-1]
    n = p.shape[0]
    order = np.lexsort((np.arange(n), -p))
    keep = n
    if 0 < top_k < keep:
        keep = top_k
    if 0 < top_p < 1:
        cum = np.cumsum(p[order[:keep]])
        hit = np.nonzero(cum >= top_p)[0]
        if hit.size:
            keep = int(hit[0]) + 1
    acc = np.cumsum(p[order[:keep]])
    u = rng.uniform() * acc[-1]
    i = int(np.searchsorted(acc, u, side="right"))
    return int(order[min(i, keep - 1)])


def plp_row(np, lg, tok, k):
    """One prompt position: (tok, its logprob, its rank (1 + the ids with a higher logprob), [(id, logprob)] of the
    k best, ties by lower id), the log-softmax in float64 as logprobs_of."""
    x = lg.astype(np.float64)
    mx = x.max()
    x = x - (mx + np.log(np.cumsum(np.exp(x - mx))[-1]))
    k = min(k, x.shape[0])
    top = []
    if k > 0:
        kth = np.partition(x, x.shape[0] - k)[x.shape[0] - k]
        cand = np.nonzero(x >= kth)[0]
        cand = cand[np.lexsort((cand, -x[cand]))][:k]
        top = [(int(i), float(x[i])) for i in cand]
    return int(tok), float(x[tok]), 1 + int(np.count_nonzero(x > x[tok])), top


def logprobs_of(np, lg, chosen, k):
    """samp_logprobs: (logprob of chosen, [(id, logprob)] of the k best, ties by lower id)."""
    x = lg.astype(np.float64)
    mx = x.max()
    lse = mx + np.log(np.cumsum(np.exp(x - mx))[-1])
    k = min(k, MAX_TOP_LOGPROBS, x.shape[0])
    top = np.lexsort((np.arange(x.shape[0]), -x))[:k] if k > 0 else []
    return float(x[chosen] - lse), [(int(i), float(x[i] - lse)) for i in top]


# ------------------------------------------------------------------ requests
def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _encode(fn, arg):
    """fn(arg), or None where the text holds code points UTF-8 cannot encode (JSON's lone surrogate escapes)."""
    try:
        return fn(arg)
    except UnicodeEncodeError:
        return None


class Job:
    """One validated request: prompt ids and generation parameters; filled by the scheduler."""

    def __init__(self, api, ids, max_tokens, temperature, top_p, top_k, seed, stop, logprobs, plk=-1, echo=None):
        self.api, self.ids = api, ids
        self.plk, self.echo, self.plp = plk, echo, None  # prompt logprobs K (-1: none); echo: the prompt text
        self.max_tokens, self.temperature, self.top_p, self.top_k = max_tokens, temperature, top_p, top_k
        self.seed, self.stop, self.logprobs = seed, stop, logprobs
        self.tokens, self.lp, self.text = [], [], bytearray()
        self.finish = "length"
        self.error = None
        self.done = threading.Event()


def parse_request(srv, api, body):
    """Job from a request body (bytes); raises ApiError (4xx)."""
    try:
        req = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ApiError(400, "request body is not valid JSON: %s" % e) from None
    if not isinstance(req, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = req.get("model")
    if not isinstance(model, str):
        raise ApiError(400, "'model' is required and must be a string", "model")
    if model != srv.name:
        raise ApiError(404, "model '%s' does not exist (this server has '%s')" % (model[:200], srv.name), "model",
                       "model_not_found")
    n = req.get("n", 1)
    if n is not None and (not _is_int(n) or n != 1):
        raise ApiError(400, "'n' must be 1 (one choice per request)", "n")
    if req.get("stream") not in (None, False):
        raise ApiError(400, "'stream' is not supported", "stream")
    tok = srv.tok
    if api == "chat":
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ApiError(400, "'messages' is required and must be a non-empty array", "messages")
        if len(msgs) > MAX_MESSAGES:
            raise ApiError(400, "'messages' has %d entries (at most %d)" % (len(msgs), MAX_MESSAGES), "messages")
        conv = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise ApiError(400, "messages[%d] must be an object" % i, "messages")
            role, content = m.get("role"), m.get("content")
            if role not in ("system", "user", "assistant"):
                raise ApiError(400, "messages[%d].role must be system, user or assistant" % i, "messages")
            if isinstance(content, list):  # [{"type": "text", "text": ..}]
                parts = []
                for p in content:
                    if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                        raise ApiError(400, "messages[%d].content: only text parts are supported" % i, "messages")
                    parts.append(p["text"])
                content = "".join(parts)
            if not isinstance(content, str):
                raise ApiError(400, "messages[%d].content must be a string" % i, "messages")
            conv.append((role, content))
        agp, cont = req.get("add_generation_prompt", True), req.get("continue_final_message", False)
        if not isinstance(agp, bool) or not isinstance(cont, bool):
            raise ApiError(400, "'add_generation_prompt' and 'continue_final_message' must be booleans",
                           "add_generation_prompt" if not isinstance(agp, bool) else "continue_final_message")
        if cont and agp:
            raise ApiError(400, "'continue_final_message' needs 'add_generation_prompt': false", "continue_final_message")
        if cont and conv[-1][0] != "assistant":
            raise ApiError(400, "'continue_final_message' needs an assistant message last", "continue_final_message")
        if req.get("echo") not in (None, False):
            raise ApiError(400, "'echo' is not supported on chat (use prompt_logprobs)", "echo")
        ids = _encode(lambda c: tok.chat(c, agp, cont), conv)
        echo = None
        lp = req.get("logprobs", False)
        if lp is not None and not isinstance(lp, bool):
            raise ApiError(400, "'logprobs' must be a boolean (chat); use top_logprobs for the count", "logprobs")
        k = req.get("top_logprobs")
        if k is not None and (not _is_int(k) or not 0 <= k <= MAX_TOP_LOGPROBS):
            raise ApiError(400, "'top_logprobs' must be an integer in [0, %d]" % MAX_TOP_LOGPROBS, "top_logprobs")
        if k and not lp:
            raise ApiError(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs")
        logprobs = (k or 0) if lp else -1  # -1: none; 0: the chosen token's only
        max_key = "max_completion_tokens" if "max_completion_tokens" in req else "max_tokens"
        default_max = srv.cfg.ctx
    else:
        prompt = req.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ApiError(400, "'prompt' is required and must be a string (one prompt per request)", "prompt")
        ids = _encode(tok.encode, prompt)
        lp = req.get("logprobs")
        if lp is not None and (not _is_int(lp) or not 0 <= lp <= MAX_TOP_LOGPROBS):
            raise ApiError(400, "'logprobs' must be an integer in [0, %d] (completions)" % MAX_TOP_LOGPROBS, "logprobs")
        logprobs = lp if lp is not None else -1
        max_key, default_max = "max_tokens", 16
        echo = req.get("echo", False)
        if echo is not None and not isinstance(echo, bool):
            raise ApiError(400, "'echo' must be a boolean", "echo")
        echo = prompt if echo else None
    plk = req.get("prompt_logprobs")
    if plk is not None and (not _is_int(plk) or not 0 <= plk <= MAX_TOP_LOGPROBS):
        raise ApiError(400, "'prompt_logprobs' must be an integer in [0, %d]" % MAX_TOP_LOGPROBS, "prompt_logprobs")
    plk = -1 if plk is None else plk
    mt = req.get(max_key)
    if mt is None:
        mt = default_max
    if not _is_int(mt) or mt < 0:
        raise ApiError(400, "'%s' must be a non-negative integer" % max_key, max_key)
    temp = req.get("temperature")
    temp = 1.0 if temp is None else temp
    if not _is_num(temp) or not 0 <= temp <= 2:
        raise ApiError(400, "'temperature' must be a number in [0, 2]", "temperature")
    top_p = req.get("top_p")
    top_p = 1.0 if top_p is None else top_p
    if not _is_num(top_p) or not 0 <= top_p <= 1:
        raise ApiError(400, "'top_p' must be a number in [0, 1]", "top_p")
    top_k = req.get("top_k")
    top_k = 0 if top_k is None else top_k
    if not _is_int(top_k) or top_k < 0:
        raise ApiError(400, "'top_k' must be a non-negative integer", "top_k")
    seed = req.get("seed")
    if seed is None:
        seed = srv.next_seed()
    elif not _is_int(seed) or not -(1 << 63) <= seed < (1 << 64):
        raise ApiError(400, "'seed' must be a 64-bit integer", "seed")
    stop = req.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or len(stop) > MAX_STOP or not all(isinstance(s, str) for s in stop):
        raise ApiError(400, "'stop' must be a string or an array of at most %d strings" % MAX_STOP, "stop")
    stop = [s.encode("utf-8") for s in stop if s]
    if any(len(s) > MAX_STOP_LEN for s in stop):
        raise ApiError(400, "a stop string is longer than %d bytes" % MAX_STOP_LEN, "stop")
    if ids is None:
        raise ApiError(400, "the %s is not valid Unicode (a lone surrogate escape?)" % ("prompt" if api != "chat" else "messages"),
                       "prompt" if api != "chat" else "messages")
    if not ids:
        raise ApiError(400, "empty prompt (no tokens)", "prompt" if api != "chat" else "messages")
    if len(ids) >= srv.cfg.ctx:
        raise ApiError(400, "prompt of %d tokens does not fit the context of %d" % (len(ids), srv.cfg.ctx),
                       "prompt" if api != "chat" else "messages", "context_length_exceeded")
    return Job(api, ids, mt, float(temp), float(top_p), top_k, seed, stop, logprobs, plk, echo)


# ------------------------------------------------------------------ the scheduler
class Scheduler(threading.Thread):
    def __init__(self, srv):
        super().__init__(daemon=True)
        self.srv = srv
        self.q = queue.Queue()

    def submit(self, job):
        self.q.put(job)
        job.done.wait()

    def run(self):
        srv = self.srv
        while True:
            jobs = [self.q.get()]
            deadline = time.monotonic() + srv.batch_wait
            while len(jobs) < srv.batch:
                left = deadline - time.monotonic()
                try:
                    jobs.append(self.q.get(timeout=left) if left > 0 else self.q.get_nowait())
                except queue.Empty:
                    break
            try:
                srv.generate(jobs)
            except Exception as e:  # a failure of the model (e.g. out of memory) fails these requests only
                for j in jobs:
                    if not j.done.is_set():
                        j.error = "%s: %s" % (type(e).__name__, e)
            srv.stats["batches"] += 1
            srv.stats["requests"] += len(jobs)
            srv.stats["max_batch_seen"] = max(srv.stats["max_batch_seen"], len(jobs))
            for j in jobs:
                j.done.set()


class Server:
    def __init__(self, a):
        import numpy
        import torch
        import model as model_mod
        import tokenizer
        self.np, self.torch = numpy, torch
        self.args = a
        self.batch = a.batch
        self.batch_wait = a.batch_wait_ms / 1000.0
        if a.threads > 0:
            torch.set_num_threads(a.threads)
        tf32_set = model_mod.set_tf32(a.tf32 == "on") if a.device == "cuda" else None
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
        self.g, self.model = model_mod.load(a.model, a.device, dtype, a.attn, a.sdpa_backend)
        self.cfg = self.model.cfg
        self.tok = tokenizer.Tokenizer(self.g.kv, a.model)
        if self.tok.n_vocab != self.model.n_vocab:
            raise tokenizer.TokenizerError("%s: %d tokens in the vocabulary, %d rows in token_embd" %
                                           (a.model, self.tok.n_vocab, self.model.n_vocab))
        self.name = a.name or os.path.splitext(os.path.basename(a.model))[0]
        self._seed_lock = threading.Lock()
        self._seed_n = 0
        self.stats = {"batches": 0, "requests": 0, "max_batch_seen": 0}
        self.started = int(time.time())
        self.meta = {
            "framework": "pytorch", "torch": torch.__version__, "numpy": numpy.__version__,
            "python": sys.version.split()[0], "device": a.device,
            "device_name": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
            "dtype": a.dtype, "tf32": a.tf32, "tf32_effective": a.device == "cuda" and a.tf32 == "on", "tf32_setting": tf32_set,
            "attn": a.attn, "sdpa_backend": a.sdpa_backend if a.attn == "sdpa" else None,
            "batch": a.batch, "batch_wait_ms": a.batch_wait_ms, "prefill_chunk": a.prefill_chunk,
            "threads": torch.get_num_threads(), "seed": a.seed,
            "model": self.name, "model_path": os.path.abspath(a.model), "arch": self.cfg.arch,
            "experts": self.cfg.experts, "context_length": self.cfg.ctx, "n_vocab": self.model.n_vocab,
            "weight_types": self.model.weight_types, "chat_template": self.tok.template,
        }
        self._warm_up()
        self.meta["blas"] = blas_libraries()
        self.sched = Scheduler(self)
        self.sched.start()

    def _warm_up(self):
        """One forward of a padded batch of two (the paths every request takes), so a setting that cannot run
        (a dtype or SDPA backend this device lacks) fails at start-up, not on the first request."""
        ids = self.tok.encode("warm up")
        j1 = Job("completions", ids, 2, 0.0, 1.0, 0, 0, [], 1)
        j2 = Job("completions", ids[:1] + ids, 2, 0.0, 1.0, 0, 0, [], -1)
        self.generate([j1, j2] if self.batch > 1 else [j1])

    def next_seed(self):
        with self._seed_lock:
            self._seed_n += 1
            return self.args.seed + self._seed_n

    def generate(self, jobs):
        """Decodes jobs together (padded batch) until each finishes; fills their tokens, text, logprobs, finish."""
        np, torch, model, cfg = self.np, self.torch, self.model, self.cfg
        dev = model.device
        rows = []
        for j in jobs:
            k = max(j.plk, j.logprobs if j.echo is not None else -1)
            if k >= 0:
                j.plp = self.score(j.ids, k)
        for j in jobs:
            j.n_max = min(j.max_tokens, cfg.ctx - len(j.ids) + 1)
            if j.max_tokens <= 0:
                j.finish = "length"
            else:
                j.rng = Rng(j.seed)
                rows.append(j)
        if not rows:
            return
        T = max(len(j.ids) for j in rows)
        cols = T + max(j.n_max for j in rows) - 1
        pad = torch.tensor([T - len(j.ids) for j in rows], dtype=torch.long, device=dev)
        ids = torch.tensor([[0] * (T - len(j.ids)) + j.ids for j in rows], dtype=torch.long, device=dev)
        cache = model.new_cache(len(rows), max(cols, T))
        step = self.args.prefill_chunk or T
        for c0 in range(0, T, step):  # chunked prefill: the mask and scores of a chunk are (chunk x columns)
            logits = model.forward(ids[:, c0:c0 + step], pad, cache)
        logits = logits.cpu().numpy()
        live = rows
        while True:
            nxt, keep = [], []
            for r, j in enumerate(live):
                lg = logits[r]
                t = pick(np, lg, j.temperature, j.top_k, j.top_p, j.rng)
                if self._accept(j, lg, t):
                    nxt.append(t)
                    keep.append(r)
            if not keep:
                break
            if len(keep) < len(live):
                model.compact(cache, keep)
                pad = pad[torch.tensor(keep, dtype=torch.long, device=dev)]
                live = [live[r] for r in keep]
            logits = model.forward(torch.tensor(nxt, dtype=torch.long, device=dev)[:, None], pad, cache).cpu().numpy()

    def score(self, ids, k):
        """The prompt's logprobs: [None] then, for each token i >= 1, (id, logprob, rank, [(id, logprob)] of the
        top k) under the logits of tokens [0, i) (one forward with every row's logits, in prefill chunks)."""
        np, torch, model = self.np, self.torch, self.model
        dev = model.device
        T = len(ids)
        cache = model.new_cache(1, T)
        pad = torch.zeros(1, dtype=torch.long, device=dev)
        x = torch.tensor([ids], dtype=torch.long, device=dev)
        step = self.args.prefill_chunk or T
        out = [None]
        for c0 in range(0, T, step):
            lg = model.forward(x[:, c0:c0 + step], pad, cache, all_logits=True)[0].cpu().numpy()
            for r in range(lg.shape[0]):
                i = c0 + r + 1  # the token row r predicts
                if i < T:
                    out.append(plp_row(np, lg[r], ids[i], k))
        return out

    def _accept(self, j, lg, t):
        """seq_accept: records token t of job j; False when j is finished."""
        if t in self.tok.eog:
            j.finish = "stop"
            return False
        if j.logprobs >= 0:
            j.lp.append((t,) + logprobs_of(self.np, lg, t, j.logprobs))
        j.tokens.append(t)
        before = len(j.text)
        j.text += self.tok.token_bytes(t)
        for s in j.stop:
            if len(j.text) < len(s):
                continue
            frm = before - len(s) + 1 if before >= len(s) else 0
            hit = j.text.find(s, frm)
            if hit >= 0:
                del j.text[hit:]
                j.finish = "stop"
                return False
        if len(j.tokens) >= j.n_max:
            j.finish = "length"
            return False
        return True

    # ---- responses
    def response(self, j):
        text = bytes(j.text).decode("utf-8", errors="replace")
        usage = {"prompt_tokens": len(j.ids), "completion_tokens": len(j.tokens),
                 "total_tokens": len(j.ids) + len(j.tokens)}
        tt = self.tok.token_text
        created = int(time.time())
        fp = "torch-%s-%s-%s-%s-b%d" % (self.meta["torch"], self.args.device, self.args.dtype, self.args.attn, self.batch)
        plp = None
        if j.plk >= 0 and j.plp is not None:  # vLLM's shape: the prompt's token first, then the top K
            plp = [None]
            for t, l, rank, top in j.plp[1:]:
                d = {str(t): {"logprob": l, "rank": rank, "decoded_token": tt(t)}}
                for r, (i, v) in enumerate(top[:j.plk]):
                    d.setdefault(str(i), {"logprob": v, "rank": r + 1, "decoded_token": tt(i)})
                plp.append(d)
        if j.api == "chat":
            lp = None
            if j.logprobs >= 0:
                lp = {"content": [{"token": tt(t), "logprob": l, "bytes": list(self.tok.token_bytes(t)),
                                   "top_logprobs": [{"token": tt(i), "logprob": v, "bytes": list(self.tok.token_bytes(i))}
                                                    for i, v in top]} for t, l, top in j.lp]}
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": lp,
                      "finish_reason": j.finish}
            obj = "chat.completion"
        else:
            lp = None
            if j.logprobs >= 0:
                offs, o = [], 0
                for t, _, _ in j.lp:
                    offs.append(o)
                    o += len(tt(t))
                lp = {"tokens": [tt(t) for t, _, _ in j.lp], "token_logprobs": [l for _, l, _ in j.lp],
                      "top_logprobs": [{tt(i): v for i, v in top} for _, _, top in j.lp], "text_offset": offs}
            if j.echo is not None:
                if lp is not None:
                    lp = self._echo_logprobs(j, lp)
                text = j.echo + text
            choice = {"index": 0, "text": text, "logprobs": lp, "finish_reason": j.finish}
            if plp is not None:
                choice["prompt_logprobs"] = plp
                choice["prompt_token_ids"] = list(j.ids)
            obj = "text_completion"
        out = {"id": "%s-%d" % ("chatcmpl" if j.api == "chat" else "cmpl", id(j)), "object": obj, "created": created,
               "model": self.name, "system_fingerprint": fp, "choices": [choice], "usage": usage}
        if j.api == "chat" and plp is not None:
            out["prompt_logprobs"] = plp
            out["prompt_token_ids"] = list(j.ids)
        return out

    def _echo_logprobs(self, j, gen):
        """OpenAI's echo: the prompt's tokens (text_offset in code points of the prompt, the first logprob null,
        top_logprobs token text -> logprob of the top K and the token itself), then the completion's (gen, its
        offsets moved past the prompt)."""
        tt, tb = self.tok.token_text, self.tok.token_bytes
        pb = j.echo.encode("utf-8")
        cps = lambda b: sum(1 for c in b if (c & 0xC0) != 0x80)  # noqa: E731
        toks, lps, tops, offs, o = [], [], [], [], 0
        for i, t in enumerate(j.ids):
            piece = b"" if i == 0 and t == self.tok.bos else tb(t)  # a BOS is not in the text
            toks.append(tt(t))
            offs.append(cps(pb[:min(o, len(pb))]))
            o += len(piece)
            if i == 0 or j.plp is None:
                lps.append(None)
                tops.append(None)
                continue
            _, l, _, top = j.plp[i]
            d = {}
            for a, v in top[:j.logprobs]:
                d.setdefault(tt(a), v)
            d.setdefault(tt(t), l)
            lps.append(l)
            tops.append(d)
        base = cps(pb)
        return {"tokens": toks + gen["tokens"], "token_logprobs": lps + gen["token_logprobs"],
                "top_logprobs": tops + gen["top_logprobs"], "text_offset": offs + [base + x for x in gen["text_offset"]]}

    def health(self):
        return dict(self.meta, status="ok", uptime_s=int(time.time()) - self.started, **self.stats)

    def models(self):
        return {"object": "list", "data": [{"id": self.name, "object": "model", "created": self.started,
                                            "owned_by": "driftbench-torch-server", "meta": self.meta}]}


# ------------------------------------------------------------------ HTTP
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "driftbench-torch-server/1"
    timeout = 600  # seconds a connection may sit idle or half-sent before its thread lets it go
    srv = None  # Server, set in main

    def log_message(self, fmt, *args):
        if self.srv.args.verbose:
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def _send(self, status, obj, close=False):
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:  # the client went away
            self.close_connection = True

    def handle_expect_100(self):
        """An oversize body is refused before the client sends it (curl asks "Expect: 100-continue" for large ones)."""
        cl = self.headers.get("Content-Length", "")
        if cl.strip().isdigit() and int(cl) > MAX_BODY:
            self._error(ApiError(413, "request body of %d bytes (at most %d)" % (int(cl), MAX_BODY), code="request_too_large"),
                        close=True)
            return False
        return super().handle_expect_100()

    def send_error(self, code, message=None, explain=None):
        """http.server's own errors (a malformed request line, headers too long, ...) in OpenAI's error shape."""
        try:
            self._send(code, ApiError(code, message or explain or "HTTP error %d" % code, code="http_error").body(), close=True)
        except OSError:
            self.close_connection = True

    def _error(self, e, close=False):
        self._send(e.status, e.body(), close)

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/health", "/v1/health"):
            self._send(200, self.srv.health())
        elif path == "/v1/models":
            self._send(200, self.srv.models())
        elif path in ("/v1/completions", "/v1/chat/completions"):
            self._error(ApiError(405, "use POST for %s" % path, code="method_not_allowed"))
        else:
            self._error(ApiError(404, "no such endpoint: %s" % path[:200], code="not_found"))

    def do_POST(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        api = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}.get(path)
        if self.headers.get("Transfer-Encoding"):
            return self._error(ApiError(411, "a Content-Length is required (no chunked bodies)"), close=True)
        cl = self.headers.get("Content-Length")
        if cl is None or not cl.strip().isdigit():
            return self._error(ApiError(411, "a valid Content-Length is required"), close=True)
        n = int(cl)
        if n > MAX_BODY:
            if n <= 8 * MAX_BODY:  # read it (a client still sending would not see the answer), up to a bound
                left = n
                while left > 0:
                    got = self.rfile.read(min(left, 1 << 20))
                    if not got:
                        break
                    left -= len(got)
            return self._error(ApiError(413, "request body of %d bytes (at most %d)" % (n, MAX_BODY),
                                        code="request_too_large"), close=True)
        body = self.rfile.read(n)
        if len(body) != n:
            self.close_connection = True
            return
        if api is None:
            return self._error(ApiError(404, "no such endpoint: %s" % path[:200], code="not_found"))
        try:
            job = parse_request(self.srv, api, body)
        except ApiError as e:
            return self._error(e)
        except Exception as e:  # noqa: BLE001 - a request must never take the connection down unanswered
            return self._error(ApiError(500, "internal error reading the request: %s: %s" % (type(e).__name__, e),
                                        etype="server_error"))
        self.srv.sched.submit(job)
        if job.error:
            return self._error(ApiError(500, "generation failed: %s" % job.error, etype="server_error"))
        self._send(200, self.srv.response(job))

    def do_PUT(self):
        self._error(ApiError(405, "method not allowed", code="method_not_allowed"))

    do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_PUT


def blas_libraries():
    """The BLAS / MKL shared objects this process has loaded (after a forward): on Debian, torch's matmuls go
    to whatever libblas.so.3 points at (the generic reference BLAS unless OpenBLAS or BLIS is installed), a
    framework setting that changes both speed and numerics."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path).lower()
                if base.endswith(".so") or ".so." in base:
                    if "blas" in base or "mkl" in base or "blis" in base:
                        found.add(os.path.realpath(path))
    except OSError:
        return None
    return sorted(found)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="serve.py", description="OpenAI-compatible PyTorch server for a GGUF model")
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--name", default=None, help="served model name (default: the file's stem)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--tf32", choices=["on", "off"], default="off")
    ap.add_argument("--attn", choices=["math", "sdpa"], default="math")
    ap.add_argument("--sdpa-backend", choices=["auto", "flash", "efficient", "math"], default="auto")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--batch-wait-ms", type=float, default=5.0)
    ap.add_argument("--prefill-chunk", type=int, default=None,
                    help="prompt columns per prefill forward (0: all; default 512, 0 with --sdpa-backend flash)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    a = ap.parse_args(argv)
    if not 1 <= a.batch <= 4096:
        ap.error("--batch %d: must be in [1, 4096]" % a.batch)
    if not 0 <= a.batch_wait_ms <= 10000:
        ap.error("--batch-wait-ms must be in [0, 10000]")
    flash = a.attn == "sdpa" and a.sdpa_backend == "flash"
    if a.prefill_chunk is None:
        a.prefill_chunk = 0 if flash else 512
    if flash and a.prefill_chunk:
        ap.error("--sdpa-backend flash takes no attention mask, which a chunked prefill needs: use --prefill-chunk 0")
    if a.prefill_chunk < 0:
        ap.error("--prefill-chunk must be >= 0")
    if a.threads < 0:
        ap.error("--threads must be >= 0")
    if not 0 <= a.port <= 65535:
        ap.error("--port must be in [0, 65535]")
    return ap, a


def main(argv=None):
    ap, a = parse_args(sys.argv[1:] if argv is None else argv)
    if not os.path.isfile(a.model):
        ap.error("--model %s: no such file" % a.model)
    import gguf_reader
    try:  # the file's structure first: a bad file fails fast, before PyTorch is imported
        gguf_reader.GGUFFile(a.model).close()
    except (gguf_reader.GGUFError, OSError) as e:
        print("serve.py: error: %s" % e, file=sys.stderr)
        return 2
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("serve.py: error: PyTorch is not importable with %s (%s); Debian: apt-get install python3-torch" %
              (sys.executable, e), file=sys.stderr)
        return 2
    if a.attn == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        ap.error("--attn sdpa: this torch (%s) has no F.scaled_dot_product_attention (torch >= 2.0 does); use --attn math"
                 % torch.__version__)
    if a.attn == "sdpa" and a.sdpa_backend == "flash" and a.batch > 1:
        ap.error("--sdpa-backend flash takes no attention mask, which a padded batch needs: use --batch 1, or the "
                 "efficient / math backend")
    if a.attn != "sdpa" and a.sdpa_backend != "auto":
        ap.error("--sdpa-backend needs --attn sdpa")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch %s sees no CUDA device" % torch.__version__)
    try:
        srv = Server(a)
    except Exception as e:  # the model cannot be read or run with these settings
        print("serve.py: error: %s: %s" % (a.model, e), file=sys.stderr)
        return 2
    Handler.srv = srv
    try:
        httpd = ThreadingHTTPServer((a.host, a.port), Handler)
    except OSError as e:
        print("serve.py: error: cannot listen on %s:%d: %s" % (a.host, a.port, e), file=sys.stderr)
        return 2
    httpd.daemon_threads = True
    def on_term(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    print("listening on http://%s:%d" % (a.host, httpd.server_address[1]), flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
