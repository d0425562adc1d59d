"""train.py - data preparation, training and export of the shipped models.

Subcommands (see README):
  bpe    DATA_DIR TOK.json            train the byte-level BPE on the train splits
  prep   DATA_DIR TOK.json OUT.bin.gz tokenize the examples exactly as the engine will see them
  train  --arch llama|qwen2|moe ...   train one model (PyTorch), export GGUF + logits fixture

The text a model is trained on is exactly what the embedded target sends
(src/engine/embedded.c, default api=completions: the rendered template of
src/suite/template.c tokenized as raw text with the model's default BOS),
followed by the reference answer's tokens and <|endoftext|>. A fifth of the
non-code examples are rendered for api=chat instead (the built-in template
<|user|>\\n{msg}<|end|>\\n<|assistant|>\\n of drift_model_chat_tokens, answer
then <|end|>). Prompt and answer are tokenized separately, as at inference
the prompt is tokenized alone and the answer is generated token by token.
"""
import argparse
import array
import gzip
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gguf_export  # noqa: E402

SUITES = ["math", "code", "safety", "chat", "long"]
LONG_INSTRUCTION = "\n\nAnswer the question based on the document above, briefly.\n"


# ---------------------------------------------------------------- templates (template.c; long_context v2)
def render_long(inp):
    mark = "\n\nQuestion: "
    q = inp.rfind(mark)
    if q < 0:
        return inp + LONG_INSTRUCTION + "Answer:"
    qs, lead = inp[q + len(mark):], ""
    a = qs.rfind("\nAnswer:")
    if a >= 0:
        qs, lead = qs[:a], qs[a + len("\nAnswer:"):].strip()
    qs = qs.rstrip()
    if qs.endswith("Answer:"):
        qs = qs[:-7].rstrip()
    return inp[:q] + LONG_INSTRUCTION + "Question: " + qs + "\nAnswer:" + (" " + lead if lead else "")


def render(workload, inp, chat):
    if workload == "math":
        return inp + "\n\nSolve step by step and end with '#### <number>'." if chat else "Question: " + inp + "\nAnswer:"
    if workload == "code":
        return ("Complete the following Python function. Reply with the full function in a ```python block.\n\n" + inp) if chat else inp
    if workload == "safety":
        return inp if chat else "User: " + inp + "\nAssistant:"
    if workload == "chat":
        return inp
    if workload == "long_context":
        return render_long(inp)
    return inp


def answer_of(workload, ref):
    if workload == "math":
        return ref["solution"]
    if workload == "code":
        return ref["canonical_solution"]
    if workload in ("safety", "chat"):
        return ref["target"]
    if workload == "long_context":
        return ref["answers"][0]
    raise ValueError(workload)


def read_suite(data_dir, name):
    p = os.path.join(data_dir, name + ".jsonl")
    op = gzip.open if not os.path.exists(p) else open
    if not os.path.exists(p):
        p += ".gz"
    with op(p, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def completion_space(workload, ans):
    """Completions prompts for math/safety/long end with ':' and the answer follows after one space."""
    if workload in ("math", "safety", "long_context") and not ans.startswith((" ", "\n")):
        return " " + ans
    return ans


# ---------------------------------------------------------------- bpe / prep
def cmd_bpe(a):
    texts = []
    for s in SUITES:
        for i, r in enumerate(read_suite(a.data, s)):
            if i >= a.per_suite:
                break
            wl = r["workload"]
            texts.append(render(wl, r["input"], False))
            texts.append(render(wl, r["input"], True))
            texts.append(answer_of(wl, r["reference"]))
    if a.guard:  # the guard's prompt words and labels
        import guard_data
        items = [r for i, r in zip(range(a.per_suite), read_suite(a.data, "safety"))]
        texts += [t + guard_data.LABELS[l] for t, l in guard_data.examples(items, guard_data.goals(a.guard), per_item=1)]
    t0 = time.time()
    tokens, merges = bpe.train(texts, a.vocab, log=lambda m: print(m, flush=True), pre=a.pre)
    tok = bpe.Tokenizer(tokens, merges, pre=a.pre)
    tok.save(a.out)
    print("bpe: %d tokens, %d merges, %.1f s" % (len(tokens), len(merges), time.time() - t0))


def example_ids(tok, wl, inp, ans, chat):
    eot = tok.special("<|endoftext|>")
    if chat:
        p = [eot, tok.special("<|user|>")] + tok.encode("\n") + tok.encode(render(wl, inp, True)) + [tok.special("<|end|>")] + \
            tok.encode("\n") + [tok.special("<|assistant|>")] + tok.encode("\n")
        return p, tok.encode(ans) + [tok.special("<|end|>")]
    return [eot] + tok.encode(render(wl, inp, False)), tok.encode(completion_space(wl, ans)) + [eot]


def cmd_prep(a):
    tok = bpe.Tokenizer.load(a.tok)
    out = array.array("H")
    stats = {}
    if a.guard:  # the guard's examples: prompt, then the one label token
        import guard_data
        labels = [tok.encode(x) for x in guard_data.LABELS]
        assert all(len(x) == 1 for x in labels) and labels[0] != labels[1], labels
        items = list(read_suite(a.data, "safety"))
        ex = guard_data.examples(items, guard_data.goals(a.guard), per_item=a.guard_per_item)
        lens = []
        for text, lab in ex:
            p = [tok.special("<|endoftext|>")] + tok.encode(text)
            out.append(len(p))
            out.append(1)
            out.extend(p)
            out.append(labels[lab][0])
            lens.append(len(p) + 1)
        lens.sort()
        stats["guard"] = {"examples": len(ex), "unsafe": sum(l for _, l in ex), "tokens": sum(lens), "len_median": lens[len(lens) // 2],
                          "len_max": lens[-1], "safety_items": len(items)}
        print(stats, flush=True)
    for s in (a.suites.split(",") if a.suites else []):
        n = 0
        lens = []
        for i, r in enumerate(read_suite(a.data, s)):
            if i >= a.per_suite:
                break
            wl = r["workload"]
            ans = answer_of(wl, r["reference"])
            chat = wl != "code" and (i % 5 == 4)
            p, q = example_ids(tok, wl, r["input"], ans, chat)
            if len(p) + len(q) > a.max_len:
                continue
            out.append(len(p))
            out.append(len(q))
            out.extend(p)
            out.extend(q)
            lens.append(len(p) + len(q))
            n += 1
        lens.sort()
        stats[s] = {"examples": n, "tokens": sum(lens), "len_median": lens[len(lens) // 2] if lens else 0,
                    "len_max": lens[-1] if lens else 0}
        print(s, stats[s], flush=True)
    with gzip.open(a.out, "wb") as f:
        f.write(out.tobytes())
    with open(a.out + ".json", "w") as f:
        json.dump(stats, f, indent=1)


def load_prep(path):
    with gzip.open(path, "rb") as f:
        buf = array.array("H")
        buf.frombytes(f.read())
    ex = []
    i = 0
    while i < len(buf):
        lp, la = buf[i], buf[i + 1]
        ex.append((buf[i + 2:i + 2 + lp].tolist(), buf[i + 2 + lp:i + 2 + lp + la].tolist()))
        i += 2 + lp + la
    return ex


# ---------------------------------------------------------------- long: generated in training (builtin.c gen_long)
FIRST = ["Alice", "Bruno", "Carmen", "Dmitri", "Elena", "Felix", "Greta", "Hassan", "Irene", "Jonas", "Karin", "Luis", "Mina",
         "Nils", "Oscar", "Petra", "Rafael", "Sofia", "Tomas", "Ulla", "Victor", "Wanda", "Xavier", "Yara"]
LAST = ["Moreno", "Berg", "Costa", "Ivanov", "Keller", "Larsen", "Novak", "Okafor", "Petrov", "Quist", "Rossi", "Silva",
        "Tanaka", "Urban", "Vidal", "Weber"]
CITIES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Quebec", "Tartu", "Cusco", "Porto", "Bergen", "Mombasa", "Kyoto",
          "Seville", "Gdansk", "Austin", "Perth"]
JOBS = ["a baker", "a pilot", "a nurse", "a teacher", "a chemist", "a plumber", "an architect", "a librarian", "a gardener",
        "a surgeon", "a painter", "an engineer"]
CODE_WORDS = ["animal", "apples", "bee", "bird", "blood", "body", "books", "box", "bread", "button", "candles", "card",
              "castle", "cell", "chunk", "circles", "cloud", "coat", "coral", "cookies", "cow", "desert", "desk", "dog",
              "door", "dragon", "egg", "email", "engine", "fence", "fire", "fish", "flower", "forest", "fox", "fruit",
              "garden", "gas", "gift", "girl", "guitar", "heart", "home", "honey", "house", "insects", "iron", "kitchen",
              "knives", "land", "letter", "light", "lightning", "map", "marbles", "money", "moon", "mountain", "mouse",
              "muscle", "music", "nectar", "ocean", "organ", "oxygen", "passport", "path", "pencils", "photo", "picnic",
              "plants", "poet", "pollen", "puppy", "rain", "rainforest", "reef", "robot", "rock", "salt", "school", "sea",
              "seed", "shell", "shelter", "ship", "snow", "sound", "stamps", "stickers", "story", "street", "string",
              "sun", "tea", "thunder", "trees", "turtle", "village", "virus", "volcano", "water", "whales", "wind",
              "window", "winter", "wizard", "hero", "magic", "pumps", "tides", "trays", "flash", "kit", "clip", "bull",
              "child", "class", "doll", "dollars", "kid", "night", "pan", "tour", "law", "goal"]  # builtin.c code_words
LONG_HEAD = ("The following register lists the offices of a company: a line gives an office's code word, its city and "
             "its manager.\n")
MAX_RECORDS = 119


def long_doc(rng, n_rec):
    """Lines as gen_long writes them: (number, code word, city, manager, job, badge); code words distinct."""
    words = rng.sample(CODE_WORDS, n_rec)
    return [(i + 1, w, rng.choice(CITIES), rng.choice(FIRST) + " " + rng.choice(LAST), rng.choice(JOBS),
             1000 + rng.randrange(9000)) for i, w in enumerate(words)]


def record_text(r):
    return "%d. %s %s, managed by %s, %s with badge number %d.\n" % r


def question(r):
    """(question, answer, lead): the lead (the code word) precedes the answer in the document"""
    return "In which city is the office with the code word %s?" % r[1], r[2], r[1]


class LongGen:
    """Token ids of generated long-context examples: the document and the first question exactly as
    render_long + the engine tokenize them (checked against tok.encode of the whole text), then more
    questions on the same document, each after <|endoftext|> (denser supervision)."""

    def __init__(s, tok, check=True):
        s.tok = tok
        s.eot = tok.special("<|endoftext|>")
        s.cache = {}
        s.check = check

    def enc(s, text):
        ids = s.cache.get(text)
        if ids is None:
            ids = s.cache[text] = s.tok.encode(text)
        return ids

    def rec_ids(s, r):
        # pieces split where the pre-tokenizer splits anyway ("12." | " word" | " City," | ...)
        n, w, city, who, job, code = r
        return (s.enc("%d." % n) + s.enc(" " + w) + s.enc(" %s," % city) + s.enc(" managed by %s," % who) +
                s.enc(" %s with badge number " % job) + s.enc("%d" % code) + s.enc(".\n"))

    def example(s, rng, n_rec, n_q):
        """ids and loss mask (0 none, 1 prompt, 2 answer) of one document with n_q questions"""
        recs = long_doc(rng, n_rec)
        ids = [s.eot] + s.enc(LONG_HEAD)
        for r in recs[:-1]:
            ids += s.rec_ids(r)
        asked = [rng.randrange(n_rec) for _ in range(n_q)]
        q0, a0, lead0 = question(recs[asked[0]])
        tail = record_text(recs[-1])[:-1] + LONG_INSTRUCTION + "Question: " + q0 + "\nAnswer: " + lead0
        ids += s.tok.encode(tail)
        if s.check:
            full = LONG_HEAD + "".join(record_text(r) for r in recs) + "\nQuestion: " + q0 + "\nAnswer: " + lead0
            want = [s.eot] + s.tok.encode(render_long(full))
            assert ids == want, "long: piecewise tokenization differs"
        mask = [0] + [1] * (len(ids) - 1)
        for k in range(n_q):
            if k:
                q, a, lead = question(recs[asked[k]])
                p = s.enc(LONG_INSTRUCTION + "Question: " + q + "\nAnswer: " + lead)
                ids += p
                mask += [1] * len(p)
            else:
                a = a0
            ans = s.enc(" " + a) + [s.eot]
            ids += ans
            mask += [2] * len(ans)
        return ids, mask


# ---------------------------------------------------------------- model (PyTorch)
CONFIGS = {
    "llama": dict(arch="llama", dim=256, layers=8, heads=8, kv_heads=2, hidden=768, experts=0, experts_used=0),
    "qwen2": dict(arch="qwen2", dim=256, layers=6, heads=8, kv_heads=4, hidden=1024, experts=0, experts_used=0),
    "moe": dict(arch="llama", dim=256, layers=4, heads=8, kv_heads=2, hidden=384, experts=4, experts_used=2),
    "guard": dict(arch="llama", dim=128, layers=4, heads=4, kv_heads=2, hidden=384, experts=0, experts_used=0),
}


def build_model(torch, cfg, vocab):
    nn = torch.nn
    F = torch.nn.functional
    D, H, KV = cfg["dim"], cfg["heads"], cfg["kv_heads"]
    hd = D // H
    eps = cfg["eps"]

    def rms(x, w):
        xf = x if x.dtype == torch.float64 else x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w.to(x.dtype)

    def rope(x, cos, sin, neox):  # x (B, h, T, hd); cos/sin (T, hd/2) float32 or float64
        dt = x.dtype
        x = x.to(cos.dtype)
        if neox:
            x0, x1 = x[..., :hd // 2], x[..., hd // 2:]
            return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).to(dt)
        xr = x.reshape(*x.shape[:-1], hd // 2, 2)
        x0, x1 = xr[..., 0], xr[..., 1]
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(x.shape).to(dt)

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            bias = cfg["arch"] == "qwen2"
            s.attn_norm = nn.Parameter(torch.ones(D))
            s.ffn_norm = nn.Parameter(torch.ones(D))
            s.q = nn.Linear(D, H * hd, bias=bias)
            s.k = nn.Linear(D, KV * hd, bias=bias)
            s.v = nn.Linear(D, KV * hd, bias=bias)
            s.o = nn.Linear(H * hd, D, bias=False)
            E, Fh = cfg["experts"], cfg["hidden"]
            if E:
                s.router = nn.Linear(D, E, bias=False)
                s.eg = nn.Parameter(torch.randn(E, Fh, D) * D ** -0.5)
                s.eu = nn.Parameter(torch.randn(E, Fh, D) * D ** -0.5)
                s.ed = nn.Parameter(torch.randn(E, D, Fh) * Fh ** -0.5 / math.sqrt(2 * cfg["layers"]))
            else:
                s.gate = nn.Linear(D, Fh, bias=False)
                s.up = nn.Linear(D, Fh, bias=False)
                s.down = nn.Linear(Fh, D, bias=False)
                nn.init.normal_(s.down.weight, std=Fh ** -0.5 / math.sqrt(2 * cfg["layers"]))
            nn.init.normal_(s.o.weight, std=D ** -0.5 / math.sqrt(2 * cfg["layers"]))

        def forward(s, x, cos, sin, aux):
            B, T, _ = x.shape
            h = rms(x, s.attn_norm)
            q = s.q(h).view(B, T, H, hd).transpose(1, 2)
            k = s.k(h).view(B, T, KV, hd).transpose(1, 2)
            v = s.v(h).view(B, T, KV, hd).transpose(1, 2)
            neox = cfg["arch"] == "qwen2"
            q, k = rope(q, cos, sin, neox), rope(k, cos, sin, neox)
            if KV != H:
                k = k.repeat_interleave(H // KV, dim=1)
                v = v.repeat_interleave(H // KV, dim=1)
            if hasattr(F, "scaled_dot_product_attention"):
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # PyTorch < 2.0 (CPU tests)
                sc = (q @ k.transpose(-1, -2)) * hd ** -0.5
                sc = sc.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
                a = torch.softmax(sc.float(), -1).to(v.dtype) @ v
            x = x + s.o(a.transpose(1, 2).reshape(B, T, H * hd))
            h = rms(x, s.ffn_norm)
            if cfg["experts"]:
                E, K = cfg["experts"], cfg["experts_used"]
                pr = torch.softmax(s.router(h).to(torch.promote_types(h.dtype, torch.float32)), -1)
                tv, ti = pr.topk(K, -1)
                w = torch.zeros_like(pr).scatter(-1, ti, tv / tv.sum(-1, keepdim=True)).to(h.dtype)
                g = torch.einsum("btd,efd->btef", h, s.eg.to(h.dtype))
                u = torch.einsum("btd,efd->btef", h, s.eu.to(h.dtype))
                y = torch.einsum("btef,edf->bted", F.silu(g) * u, s.ed.to(h.dtype))
                x = x + (y * w.unsqueeze(-1)).sum(2)
                # switch-style load balancing: fraction routed x mean probability
                frac = torch.zeros_like(pr).scatter(-1, ti, 1.0).mean((0, 1)) / K
                aux.append(E * (frac * pr.mean((0, 1))).sum())
            else:
                x = x + s.down(F.silu(s.gate(h)) * s.up(h))
            return x

    class Model(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(vocab, D)
            nn.init.normal_(s.emb.weight, std=0.02)
            s.blocks = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            s.norm = nn.Parameter(torch.ones(D))

        def forward(s, ids, aux=None):
            T = ids.shape[1]
            pos = torch.arange(T, device=ids.device, dtype=torch.float64)
            inv = cfg["rope_theta"] ** (-2.0 * torch.arange(hd // 2, device=ids.device, dtype=torch.float64) / hd)
            ang = pos[:, None] * inv[None, :]
            x = s.emb(ids)
            cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
            aux = [] if aux is None else aux
            for b in s.blocks:
                x = b(x, cos, sin, aux)
            x = rms(x, s.norm)
            return x @ s.emb.weight.to(x.dtype).t()

    return Model()


def param_map(model, cfg):
    """(GGUF tensor name, parameter) of every weight, in file order."""
    out = [("token_embd.weight", model.emb.weight), ("output_norm.weight", model.norm)]
    for l, b in enumerate(model.blocks):
        p = "blk.%d." % l
        out += [(p + "attn_norm.weight", b.attn_norm), (p + "attn_q.weight", b.q.weight), (p + "attn_k.weight", b.k.weight),
                (p + "attn_v.weight", b.v.weight), (p + "attn_output.weight", b.o.weight), (p + "ffn_norm.weight", b.ffn_norm)]
        if b.q.bias is not None:
            out += [(p + "attn_q.bias", b.q.bias), (p + "attn_k.bias", b.k.bias), (p + "attn_v.bias", b.v.bias)]
        if cfg["experts"]:
            out += [(p + "ffn_gate_inp.weight", b.router.weight), (p + "ffn_gate_exps.weight", b.eg), (p + "ffn_up_exps.weight", b.eu),
                    (p + "ffn_down_exps.weight", b.ed)]
        else:
            out += [(p + "ffn_gate.weight", b.gate.weight), (p + "ffn_up.weight", b.up.weight), (p + "ffn_down.weight", b.down.weight)]
    return out


def write_gguf(torch, model, cfg, tok, name, path):
    """PATH: the model as a GGUF file (metadata of cfg and tok, general.name NAME, gguf_tensors' weights)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    gguf_export.write(path, gguf_export.model_kv(cfg, tok, name), gguf_tensors(torch, model, cfg))


def gguf_tensors(torch, model, cfg):
    """(name, ne, type, bytes) of the model's weights, F16 matrices, F32 norms/biases/router."""
    from gguf_export import GGML_F16, GGML_F32

    def f16(t):
        return t.detach().to(torch.float16).cpu().contiguous().numpy().tobytes()

    def f32(t):
        return t.detach().to(torch.float32).cpu().contiguous().numpy().tobytes()

    def mat(name, w):
        return (name, list(reversed(w.shape)), GGML_F16, f16(w))

    def vec(name, w):
        return (name, list(reversed(w.shape)), GGML_F32, f32(w))

    out = [mat("token_embd.weight", model.emb.weight), vec("output_norm.weight", model.norm)]
    for l, b in enumerate(model.blocks):
        p = "blk.%d." % l
        out += [vec(p + "attn_norm.weight", b.attn_norm), mat(p + "attn_q.weight", b.q.weight), mat(p + "attn_k.weight", b.k.weight),
                mat(p + "attn_v.weight", b.v.weight), mat(p + "attn_output.weight", b.o.weight), vec(p + "ffn_norm.weight", b.ffn_norm)]
        if b.q.bias is not None:
            out += [vec(p + "attn_q.bias", b.q.bias), vec(p + "attn_k.bias", b.k.bias), vec(p + "attn_v.bias", b.v.bias)]
        if cfg["experts"]:
            out += [vec(p + "ffn_gate_inp.weight", b.router.weight), mat(p + "ffn_gate_exps.weight", b.eg),
                    mat(p + "ffn_up_exps.weight", b.eu), mat(p + "ffn_down_exps.weight", b.ed)]
        else:
            out += [mat(p + "ffn_gate.weight", b.gate.weight), mat(p + "ffn_up.weight", b.up.weight), mat(p + "ffn_down.weight", b.down.weight)]
    return out


def round_to_stored(torch, model, cfg):
    """Rounds the weights stored as F16 in the GGUF to F16 (in place), so a reference forward sees the file's weights."""
    names = {n for n, _, t, _ in gguf_tensors(torch, model, cfg) if t == 1}
    with torch.no_grad():
        mods = [("token_embd.weight", model.emb.weight)]
        for l, b in enumerate(model.blocks):
            p = "blk.%d." % l
            mods += [(p + "attn_q.weight", b.q.weight), (p + "attn_k.weight", b.k.weight), (p + "attn_v.weight", b.v.weight),
                     (p + "attn_output.weight", b.o.weight)]
            if cfg["experts"]:
                mods += [(p + "ffn_gate_exps.weight", b.eg), (p + "ffn_up_exps.weight", b.eu), (p + "ffn_down_exps.weight", b.ed)]
            else:
                mods += [(p + "ffn_gate.weight", b.gate.weight), (p + "ffn_up.weight", b.up.weight), (p + "ffn_down.weight", b.down.weight)]
        for n, w in mods:
            assert n in names, n
            w.copy_(w.to(torch.float16).to(w.dtype))


def load_gguf_weights(torch, model, cfg, path):
    """model's parameters from a GGUF file written by gguf_export (F16 or F32 tensors)"""
    import numpy as np
    got = gguf_export.read_tensors(path)
    with torch.no_grad():
        for name, w in param_map(model, cfg):
            ne, typ, data = got[name]
            arr = np.frombuffer(data, dtype=np.float16 if typ == gguf_export.GGML_F16 else np.float32)
            assert list(reversed(w.shape)) == ne, name
            w.copy_(torch.from_numpy(arr.astype(np.float32)).view(w.shape))


def logits_fixture(torch, md, tok, model_file, prompts):
    """tests/data/models/NAME.logits.json: md's (a float64 model's) logits at the first and last positions of
    [BOS] + each prompt's tokens"""
    eot = tok.special("<|endoftext|>")
    fx = {"model": model_file, "reference": "PyTorch %s float64 CPU forward of the GGUF's weights" % torch.__version__,
          "prompts": []}
    for text in prompts:
        ids = [eot] + tok.encode(text)
        with torch.no_grad():
            lg = md(torch.tensor([ids]))[0]
        fx["prompts"].append({"text": text, "ids": ids, "positions": [0, len(ids) - 1],
                              "logits": [[float(x) for x in lg[0]], [float(x) for x in lg[-1]]]})
    return fx


def make_batches(examples, tok_budget, rng):
    idx = list(range(len(examples)))
    rng.shuffle(idx)
    batches = []
    for c in range(0, len(idx), 4096):
        chunk = sorted(idx[c:c + 4096], key=lambda i: len(examples[i][0]) + len(examples[i][1]))
        cur, mx = [], 0
        for i in chunk:
            L = len(examples[i][0]) + len(examples[i][1])
            if cur and max(mx, L) * (len(cur) + 1) > tok_budget:
                batches.append(cur)
                cur, mx = [], 0
            cur.append(i)
            mx = max(mx, L)
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


def parse_phases(spec, curriculum, n_q):
    """--long-phases "END:LO-HI:Q,...,1.0:test:Q": until run fraction END, documents of LO-HI lines with Q
    questions; "test" is the test split's sizes (40-119 lines, a fifth 10-40). Without it, --long-curriculum C
    gives the two phases of the first models: C:4-40:Q/2, then 1.0:test:Q."""
    if not spec:
        spec = ("%g:4-40:%d," % (curriculum, max(2, n_q // 2)) if curriculum > 0 else "") + "1.0:test:%d" % n_q
    out = []
    for part in spec.split(","):
        f = part.split(":")
        assert len(f) == 3, part
        end, size, q = f
        if size == "test":
            lo = hi = 0
        else:
            lo, hi = (int(x) for x in size.split("-"))
            assert 1 <= lo <= hi <= MAX_RECORDS, part
        out.append((float(end), lo, hi, int(q)))
    assert out and out[-1][0] >= 1.0 and all(out[i][0] < out[i + 1][0] for i in range(len(out) - 1)), spec
    return out


def long_size(rng, ph):
    """(lines, questions) of one document in phase ph = (end, lo, hi, q)"""
    _, lo, hi, nq = ph
    if not hi:
        return (10 + rng.randrange(31) if rng.random() < 0.2 else 40 + rng.randrange(80)), nq
    return lo + rng.randrange(hi - lo + 1), nq


def long_worker(tok_path, seed, q, phase, phases):
    """Generates long examples forever (a separate process), sized by the current phase (phase.value indexes
    phases)."""
    tok = bpe.Tokenizer.load(tok_path)
    gen = LongGen(tok, check=False)
    rng = random.Random(seed)
    while True:
        n_rec, nq = long_size(rng, phases[phase.value])
        q.put(gen.example(rng, n_rec, nq))


def long_eval(torch, model, gen, n, dev, V, batch=16, ph=(1.0, 0, 0, 1)):
    """Teacher-forced exact match on n documents sized as phase ph (default: the test split's sizes; fixed
    seed, one question each): every answer token (and the closing <|endoftext|>) is the model's argmax."""
    rng = random.Random(777)
    exs = []
    for _ in range(n):
        n_rec, _ = long_size(rng, ph)
        exs.append(gen.example(rng, n_rec, 1))
    was = model.training
    model.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, n, batch):
            chunk = exs[i:i + batch]
            L = max(len(e[0]) for e in chunk)
            ids = torch.full((len(chunk), L), gen.eot, dtype=torch.long)
            for r, e in enumerate(chunk):
                ids[r, :len(e[0])] = torch.tensor(e[0])
            ids = ids.to(dev)
            with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
                pred = model(ids[:, :-1]).argmax(-1).cpu()
            for r, (e_ids, e_mask) in enumerate(chunk):
                right += all(int(pred[r, t - 1]) == e_ids[t] for t in range(1, len(e_ids)) if e_mask[t] == 2)
    model.train(was)
    return {"exact": round(right / max(1, n), 4), "n": n}


def induction_example(rng, plain, n_base, mode="whole", n_copies=8, span=16):
    """ids and loss mask of a copying example of random tokens (from plain, the non-control ids); the loss is on
    what only an induction head (find the earlier place of the current token, predict what came next there) can
    predict. mode "whole": n_base tokens, up to n_base other random tokens, then the n_base tokens again (loss on
    all of the copy but its first token). mode "spans": n_base tokens, then n_copies spans of span tokens copied
    from random places in them (loss on each span but its first token). The long-context suite's lookup (the
    code word, then its city) is such a step. In the CPU probes (probe_recall.py, models/MODELS.md) whole
    copies formed the head within 250-800 steps and the lookup then worked at once; spans did not form in
    700-800 steps, nor on the device in session 5 (about 500 steps, spans over up to 2,048 tokens). On the device
    (session 6) whole copies formed it in the shipped models after 2,000-4,500 steps of 8,192 tokens (not in
    ~700 steps of 65,536, with 60-90% of them copying): more, smaller steps is what changed."""
    base = [rng.choice(plain) for _ in range(n_base)]
    ids, mask = [0] + base, [0] * (n_base + 1)
    if mode == "whole":
        gap = rng.randrange(n_base + 1)
        ids += [rng.choice(plain) for _ in range(gap)] + base
        mask += [0] * gap + [0] + [2] * (n_base - 1)
        return ids, mask
    for _ in range(n_copies):
        st = 1 + rng.randrange(n_base - span)
        ids += ids[st:st + span]
        mask += [0] + [2] * (span - 1)
    return ids, mask


def write_snapshot(torch, model, cfg, tok, a, k, step, t):
    """OUT/NAME.sK.gguf: the weights as they are now, as the final export writes them (a copy, so training
    goes on untouched). A stage that should stop somewhere inside a band (math between 50% and 90%, say)
    writes one every --snapshot-every seconds, and each is measured afterwards."""
    import copy
    path = os.path.join(a.out, "%s.s%d.gguf" % (a.name, k))
    write_gguf(torch, copy.deepcopy(model).float().cpu(), cfg, tok, a.name, path)
    print(a.name, "snapshot", k, "step", step, "t", round(t, 1), path, flush=True)
    return {"k": k, "step": step, "t": round(t, 1), "file": os.path.basename(path)}


def cmd_train(a):
    import numpy as np  # noqa: F401  (tensor export)
    import multiprocessing as mp
    import torch

    t_start = time.time()
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    tok = bpe.Tokenizer.load(a.tok)
    V = len(tok.tokens)
    cfg = dict(CONFIGS[a.arch])
    cfg.update(ctx=a.ctx, rope_theta=a.rope_theta, eps=1e-5)
    if a.tiny:
        cfg.update(dim=32, layers=2, hidden=48, heads=4, kv_heads=2 if cfg["kv_heads"] != cfg["heads"] else 4)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    eot = tok.special("<|endoftext|>")
    plain = [i for i in range(V) if tok.tokens[i] not in tok.specials]
    # long-context examples come from generator processes (forked before CUDA starts)
    lq, phase, workers = None, None, []
    phases = parse_phases(a.long_phases, a.long_curriculum, a.long_questions)
    evals = []
    if a.long_share > 0:
        LongGen(tok, check=True).example(random.Random(a.seed), 50, 3)  # piecewise == whole-text tokenization
        ctx = mp.get_context("fork")
        lq, phase = ctx.Queue(maxsize=256), ctx.Value("i", 0)
        for k in range(a.long_workers):
            w = ctx.Process(target=long_worker, args=(a.tok, a.seed * 100 + k, lq, phase, phases),
                            daemon=True)
            w.start()
            workers.append(w)
    examples = load_prep(a.data) if a.data else []
    if a.max_examples:
        examples = examples[:a.max_examples]
    if a.repeat:
        with open(a.data + ".json") as f:
            counts = json.load(f)
        starts, o = {}, 0
        for sname in counts:
            starts[sname] = (o, o + counts[sname]["examples"])
            o += counts[sname]["examples"]
        times = {sname: 1 for sname in counts}
        for item in a.repeat.split(","):
            sname, k = item.split("=")
            assert sname in times and int(k) >= 0, item
            times[sname] = int(k)
        examples = [e for sname, (lo, hi) in starts.items() for e in examples[lo:hi] * times[sname]]  # k=0 drops a suite
    model = build_model(torch, cfg, V)
    if a.init:
        load_gguf_weights(torch, model, cfg, a.init)
        print("initialised from", a.init, flush=True)
    model = model.to(dev)
    nparam = sum(p.numel() for p in model.parameters())
    print("%s: %d params, %d examples, device %s" % (a.name, nparam, len(examples), dev), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if dev == "cuda" else {}))
    rng = random.Random(a.seed)
    step, epoch, log, snaps = 0, 0, [], []
    pool, pool_next, n_long = [], 0, 0
    short_batches = []
    t0 = time.time()
    def fresh_acc():  # per kind of step: sum and count of sampled answer losses
        return {k: [0.0, 0] for k in ("short", "long", "induct")}

    acc = fresh_acc()

    def fill_pool(most):
        nonlocal pool_next, n_long
        for _ in range(most):  # a few a step: unpickling is the trainer's own time
            try:
                ex = lq.get_nowait()
            except Exception:
                return
            n_long += 1
            if len(pool) < a.long_pool:
                pool.append(ex)
            else:
                pool[pool_next] = ex
                pool_next = (pool_next + 1) % a.long_pool

    while True:
        el = time.time() - t0
        if el > a.seconds or (a.max_steps and step >= a.max_steps):
            break
        frac = el / a.seconds if not a.max_steps else step / a.max_steps
        if phase is not None and phase.value + 1 < len(phases) and frac >= phases[phase.value][0]:
            if a.long_eval:
                g = LongGen(tok, check=False)
                evals.append({"step": step, "phase": phase.value, **long_eval(torch, model, g, a.long_eval, dev, V),
                              "this_phase": long_eval(torch, model, g, a.long_eval, dev, V, ph=phases[phase.value])})
                print(a.name, "long eval", evals[-1], flush=True)
            phase.value += 1
            del pool[:]  # drop the previous phase's documents, queued ones too
            pool_next = 0
            while True:
                try:
                    lq.get_nowait()
                except Exception:
                    break
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        kind = "short"
        if a.induct_share > 0 and rng.random() < a.induct_share:
            kind = "induct"
        if lq is not None:
            fill_pool(a.long_fill)
            while len(pool) < 32:  # at the start: wait for the generators
                pool.append(lq.get())
                n_long += 1
            if kind == "short" and (not examples or rng.random() < a.long_share):
                kind = "long"
        if kind == "induct":
            rows, top = [], max(32, a.induct_len)
            most = 3 * top + 1 if a.induct_mode == "whole" else top + 8 * 16 + 1
            while (len(rows) + 1) * most <= a.tokens_per_step or not rows:
                ids_, m_ = induction_example(rng, plain, rng.randrange(max(32, a.induct_len // 8), top + 1), a.induct_mode)
                rows.append(([eot] + ids_[1:], m_))
        elif kind == "long":
            rows, mx = [], 0
            while True:
                ex = pool[rng.randrange(len(pool))]
                if rows and max(mx, len(ex[0])) * (len(rows) + 1) > a.tokens_per_step:
                    break
                rows.append(ex)
                mx = max(mx, len(ex[0]))
        else:
            if not short_batches:
                short_batches = make_batches(examples, a.tokens_per_step, rng)
                epoch += 1
            rows = []
            for i in short_batches.pop():
                p, q = examples[i]
                rows.append((p + q, [0] + [1] * (len(p) - 1) + [2] * len(q)))
        L = max(len(r[0]) for r in rows)
        ids = torch.full((len(rows), L), eot, dtype=torch.long)
        w = torch.zeros((len(rows), L), dtype=torch.int8)  # 1 prompt target, 2 answer target
        for r, (s_ids, s_mask) in enumerate(rows):
            ids[r, :len(s_ids)] = torch.tensor(s_ids)
            w[r, :len(s_mask)] = torch.tensor(s_mask, dtype=torch.int8)
        ids, w = ids.to(dev, non_blocking=True), w.to(dev, non_blocking=True)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
            aux = []
            logits = model(ids[:, :-1], aux)
        ce = torch.nn.functional.cross_entropy(logits.float().reshape(-1, V), ids[:, 1:].reshape(-1), reduction="none")
        tw = w[:, 1:].reshape(-1)
        am, pm = (tw == 2).float(), (tw == 1).float()
        loss_a = (ce * am).sum() / am.sum().clamp(min=1)
        loss_p = (ce * pm).sum() / pm.sum().clamp(min=1)
        loss = loss_a + a.prompt_weight * loss_p
        if aux:
            loss = loss + 0.01 * torch.stack(aux).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0:
            acc[kind][0] += float(loss_a)
            acc[kind][1] += 1
        if a.snapshot_every and time.time() - t0 >= a.snapshot_every * (len(snaps) + 1):
            snaps.append(write_snapshot(torch, model, cfg, tok, a, len(snaps) + 1, step, time.time() - t0))
        if step % 100 == 0:
            rec = {"step": step, "epoch": epoch, "t": round(time.time() - t0, 1), "lr": lr, "loss_answer": float(loss_a),
                   "loss_prompt": float(loss_p), "kind": kind, "long_generated": n_long}
            for k, (sm, n) in acc.items():
                if n:
                    rec["mean_answer_loss_" + k] = round(sm / n, 4)
            acc = fresh_acc()
            log.append(rec)
            print(a.name, rec, flush=True)
        step += 1
    for wk in workers:
        wk.terminate()
    train_s = time.time() - t0
    if a.long_eval:
        evals.append({"step": step, "phase": phase.value if phase is not None else -1,
                      **long_eval(torch, model, LongGen(tok, check=False), a.long_eval, dev, V)})
        print(a.name, "long eval", evals[-1], flush=True)
    model = model.float().cpu()
    model.eval()
    path = os.path.join(a.out, a.name + ".gguf")
    write_gguf(torch, model, cfg, tok, a.name, path)
    # reference logits: the file's weights (F16 rounded), float64 forward on the CPU
    round_to_stored(torch, model, cfg)
    fixture = logits_fixture(torch, model.double(), tok, a.name + ".gguf", a.fixture_prompts)
    info = {"name": a.name, "config": cfg, "params": nparam, "seed": a.seed, "steps": step, "short_epochs_started": epoch,
            "long_generated": n_long, "train_seconds": round(train_s, 1), "total_seconds": round(time.time() - t_start, 1),
            "examples": len(examples), "tokens_per_step": a.tokens_per_step, "lr": a.lr, "warmup": a.warmup,
            "prompt_weight": a.prompt_weight, "init": a.init, "repeat": a.repeat, "long_share": a.long_share,
            "induct_share": a.induct_share, "induct_len": a.induct_len, "induct_mode": a.induct_mode,
            "long_curriculum": a.long_curriculum, "long_questions": a.long_questions, "long_pool": a.long_pool,
            "long_phases": phases, "long_eval": evals, "snapshots": snaps,
            "command": " ".join(sys.argv), "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "log": log}
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump({"train": info, "fixture": fixture}, f)
    print(a.name, "done:", step, "steps", round(train_s, 1), "s", flush=True)


FIXTURE_PROMPTS = [
    "Question: Ava has 3 apples and buys 4 more. How many apples does Ava have now?\nAnswer:",
    "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n",
    "User: Tell me about the moon.\nAssistant:",
]


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bpe")
    b.add_argument("data")
    b.add_argument("out")
    b.add_argument("--vocab", type=int, default=4096)
    b.add_argument("--per-suite", type=int, default=3000)
    b.add_argument("--pre", default="gpt-2", choices=sorted(bpe.PATTERNS), help="pre-tokenizer (GGUF tokenizer.ggml.pre)")
    b.add_argument("--guard", default="", help="src/suite/builtin.c: add the guard's prompts to the BPE texts")
    p = sub.add_parser("prep")
    p.add_argument("data")
    p.add_argument("tok")
    p.add_argument("out")
    p.add_argument("--per-suite", type=int, default=10 ** 9)
    p.add_argument("--max-len", type=int, default=3584)
    p.add_argument("--suites", default=",".join(SUITES), help="comma list of suites to write ('' for none)")
    p.add_argument("--guard", default="", help="src/suite/builtin.c: write the guard's examples (from safety.jsonl) instead")
    p.add_argument("--guard-per-item", type=int, default=2)
    t = sub.add_parser("train")
    t.add_argument("--arch", choices=sorted(CONFIGS), required=True)
    t.add_argument("--name", required=True)
    t.add_argument("--tok", required=True)
    t.add_argument("--data", default="")
    t.add_argument("--out", required=True)
    t.add_argument("--seconds", type=float, default=300)
    t.add_argument("--max-steps", type=int, default=0)
    t.add_argument("--max-examples", type=int, default=0)
    t.add_argument("--tokens-per-step", type=int, default=65536)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--warmup", type=int, default=200)
    t.add_argument("--prompt-weight", type=float, default=0.1)
    t.add_argument("--ctx", type=int, default=4096)
    t.add_argument("--rope-theta", type=float, default=10000.0)
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--tiny", action="store_true")
    t.add_argument("--init", default="", help="start from this GGUF's weights (continued training)")
    t.add_argument("--repeat", default="", help="e.g. code=4,math=0: those suites' examples k times per epoch (0: left out)")
    t.add_argument("--long-share", type=float, default=0.0, help="share of steps on generated long-context examples")
    t.add_argument("--long-curriculum", type=float, default=0.0, help="fraction of the run on short documents first")
    t.add_argument("--long-questions", type=int, default=8, help="questions per long document")
    t.add_argument("--long-workers", type=int, default=3)
    t.add_argument("--long-pool", type=int, default=3000)
    t.add_argument("--long-fill", type=int, default=8, help="generated examples taken into the pool per step (at most)")
    t.add_argument("--induct-share", type=float, default=0.0,
                   help="share of steps on random-token copying examples (induction_example) before the other kinds")
    t.add_argument("--induct-len", type=int, default=64, help="most random tokens an induction example copies from")
    t.add_argument("--induct-mode", choices=("whole", "spans"), default="whole", help="see induction_example")
    t.add_argument("--long-phases", default="", help='e.g. "0.3:2-10:16,0.6:8-50:12,1.0:test:8" (see parse_phases)')
    t.add_argument("--snapshot-every", type=float, default=0,
                   help="also write OUT/NAME.sK.gguf every this many seconds of training (0: none)")
    t.add_argument("--long-eval", type=int, default=0, help="teacher-forced exact match on N test-sized documents at each phase end")
    t.set_defaults(fixture_prompts=FIXTURE_PROMPTS)
    a = ap.parse_args()
    {"bpe": cmd_bpe, "prep": cmd_prep, "train": cmd_train}[a.cmd](a)


if __name__ == "__main__":
    main()
