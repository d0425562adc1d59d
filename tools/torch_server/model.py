"""model.py - the GGUF's transformer in PyTorch: llama (MHA / GQA), qwen2 (q/k/v biases, NEOX RoPE) and llama
mixture-of-experts, with a KV cache and padded batches.

The forward pass is src/model/forward.c's, written the way a PyTorch stack writes it (whole-tensor ops, the
framework's own matmul / softmax / SDPA kernels), so comparing the two measures framework drift:
  x = embedding(tokens)
  per layer: h = rmsnorm(x) * attn_norm; q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv);
             RoPE on q, k at each row's position (interleaved pairs for llama, halves for qwen2; angle =
             pos * base^(-2i/n_rot) in float64, then cos/sin in the compute dtype); K, V appended to the cache;
             attention over the causal window (GQA: kv head = head / (heads / kv_heads)), scale 1/sqrt(head_dim);
             x += attn Wo^T; h = rmsnorm(x) * ffn_norm;
             x += SwiGLU(h) (dense), or MoE: softmax(h Wr^T) over experts, top-k, weights renormalised to sum 1,
             each chosen expert's SwiGLU, summed in rank order.
  logits = rmsnorm(x) * output_norm @ output^T (output = token_embd when the file has no output.weight).
RMSNorm is computed in float32 whatever the dtype (then cast back), as Hugging Face's implementations do; the
softmax of the math attention path is float32 too; logits come back as float32.

Batches: B rows left-padded to a common length T; row b's position at column t is t - pad[b]; the mask lets a
row attend to its own non-pad columns up to the current one (a pad query attends to itself only, so its
softmax stays finite; its output is never used). The cache holds columns, so a decode step appends one column
for every live row. Finished rows are dropped from the cache (compact()).

Knobs: dtype (float32 / bfloat16 / float16 weights and activations), attention "math" (matmul + masked softmax)
or "sdpa" (F.scaled_dot_product_attention; the backend can be pinned with sdpa_backend where torch can), device.
"""
import math

import torch
import torch.nn.functional as F

import gguf_reader


class ModelError(Exception):
    pass


def sdpa_available():
    return hasattr(F, "scaled_dot_product_attention")


def sdpa_context(backend):
    """A context manager that restricts SDPA to one backend (flash / efficient / math), or None where this
    torch cannot choose (then a ModelError)."""
    import contextlib
    if backend in (None, "auto"):
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        b = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]
        return sdpa_kernel(b)
    except ImportError:
        pass
    k = getattr(torch.backends.cuda, "sdp_kernel", None)  # torch 2.0 - 2.2
    if k is None:
        raise ModelError("this torch (%s) cannot choose an SDPA backend" % torch.__version__)
    return k(enable_flash=backend == "flash", enable_mem_efficient=backend == "efficient", enable_math=backend == "math")


def set_tf32(on):
    """TF32 for float32 matmuls and convolutions on CUDA: the fp32_precision settings where this torch has them
    (2.9 and later, which deprecate the allow_tf32 flags and refuse a mix of the two), else the allow_tf32 flags.
    Returns a description of what was set."""
    m = torch.backends.cuda.matmul
    if hasattr(m, "fp32_precision"):
        m.fp32_precision = "tf32" if on else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if on else "ieee"
        return "cuda.matmul.fp32_precision=%s" % m.fp32_precision
    m.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return "cuda.matmul.allow_tf32=%s" % m.allow_tf32


class Config:
    def __init__(self, g):
        kv = g.kv
        self.arch = kv.get("general.architecture")
        if self.arch not in ("llama", "qwen2"):
            raise ModelError("%s: architecture %r is not supported (llama, qwen2 are)" % (g.path, self.arch))
        a = self.arch

        def geti(key, default=None):
            v = kv.get(a + "." + key, default)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ModelError("%s: %s.%s missing or not an integer" % (g.path, a, key))
            return v

        def getf(key, default):
            v = kv.get(a + "." + key, default)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ModelError("%s: %s.%s is not a number" % (g.path, a, key))
            return float(v)

        self.dim = geti("embedding_length")
        self.layers = geti("block_count")
        self.heads = geti("attention.head_count")
        self.kv_heads = geti("attention.head_count_kv", self.heads)
        self.ctx = geti("context_length", 4096)
        if not (0 < self.ctx < (1 << 24)):
            self.ctx = 4096
        self.experts = geti("expert_count", 0)
        self.experts_used = geti("expert_used_count", 0) if self.experts else 0
        self.eps = float(torch.tensor(getf("attention.layer_norm_rms_epsilon", 1e-5), dtype=torch.float32))
        self.rope_base = float(torch.tensor(getf("rope.freq_base", 10000.0), dtype=torch.float32))
        self.sliding_window = geti("attention.sliding_window", 0)
        if self.dim <= 0 or self.layers <= 0 or self.heads <= 0 or self.kv_heads <= 0 or self.dim % self.heads or \
                self.heads % self.kv_heads:
            raise ModelError("%s: inconsistent shape: dim %d, heads %d, kv heads %d" % (g.path, self.dim, self.heads, self.kv_heads))
        self.head_dim = self.dim // self.heads
        if "attn_q.weight" not in "".join(g.tensors) and "blk.0.attn_q.weight" not in g.tensors:
            raise ModelError("%s: no blk.0.attn_q.weight" % g.path)
        q = g.tensors["blk.0.attn_q.weight"]
        if q.ne[1] % self.heads == 0:
            self.head_dim = q.ne[1] // self.heads
        self.n_rot = geti("rope.dimension_count", self.head_dim)
        if self.n_rot < 2 or self.n_rot > self.head_dim or self.n_rot % 2:
            raise ModelError("%s: rope.dimension_count %d must be even and <= head dim %d" % (g.path, self.n_rot, self.head_dim))
        if self.experts and not (1 <= self.experts_used <= self.experts):
            raise ModelError("%s: expert_used_count %d not in [1, %d]" % (g.path, self.experts_used, self.experts))
        self.neox = a == "qwen2"
        # RoPE frequencies (kernels_ref.c num_rope_freq): base^(-2i/n_rot), llama3 / linear scaling, freq factors
        half = self.n_rot // 2
        freq = [self.rope_base ** (-2.0 * i / self.n_rot) for i in range(half)]
        stype = kv.get(a + ".rope.scaling.type")
        factor = kv.get(a + ".rope.scaling.factor", kv.get(a + ".rope.scale_linear", 1.0))
        if "rope_freqs.weight" in g.tensors:
            ff = g.tensor("rope_freqs.weight").reshape(-1)
            if ff.size != half:
                raise ModelError("%s: rope_freqs.weight has %d values, want %d" % (g.path, ff.size, half))
            freq = [f / float(x) for f, x in zip(freq, ff)]
        elif stype == "llama3" and factor > 1:
            lo = kv.get(a + ".rope.scaling.low_freq_factor", 1.0)
            hi = kv.get(a + ".rope.scaling.high_freq_factor", 4.0)
            octx = kv.get(a + ".rope.scaling.original_context_length", 8192)
            out = []
            for f in freq:
                wl = 2 * math.pi / f
                if wl > octx / lo:
                    f = f / factor
                elif wl >= octx / hi and hi != lo:
                    s = (octx / wl - lo) / (hi - lo)
                    f = (1 - s) * f / factor + s * f
                out.append(f)
            freq = out
        elif factor > 1 and stype in (None, "linear"):
            freq = [f / float(factor) for f in freq]
        elif stype not in (None, "none", "linear", "llama3"):
            raise ModelError("%s: rope scaling %r not supported (none, linear, llama3 are)" % (g.path, stype))
        self.rope_freq = freq


class Model:
    """weights on device in dtype; forward(ids, pos, cache, ...) -> float32 logits of the last column."""

    def __init__(self, g, device="cpu", dtype=torch.float32, attn="math", sdpa_backend=None):
        self.cfg = c = Config(g)
        self.device = torch.device(device)
        self.dtype = dtype
        self.attn = attn
        self.sdpa_backend = sdpa_backend
        self.weight_types = {}

        def W(name, shape=None, keep_f32=False):
            ti = g.tensors.get(name)
            if ti is None:
                raise ModelError("%s: tensor %s is missing" % (g.path, name))
            a = g.tensor(name)
            if shape is not None and tuple(a.shape) != tuple(shape):
                raise ModelError("%s: tensor %s has shape %s, want %s" % (g.path, name, tuple(a.shape), tuple(shape)))
            self.weight_types[ti.type_name] = self.weight_types.get(ti.type_name, 0) + 1
            t = torch.from_numpy(a.copy())
            return t.to(self.device, torch.float32 if keep_f32 else dtype)

        D, H, KV, hd, L = c.dim, c.heads, c.kv_heads, c.head_dim, c.layers
        self.tok_embd = W("token_embd.weight")
        V = self.tok_embd.shape[0]
        if self.tok_embd.shape[1] != D:
            raise ModelError("%s: token_embd.weight has width %d, want %d" % (g.path, self.tok_embd.shape[1], D))
        self.n_vocab = V
        self.output_norm = W("output_norm.weight", (D,), keep_f32=True)
        self.output = W("output.weight", (V, D)) if "output.weight" in g.tensors else self.tok_embd
        self.tied = "output.weight" not in g.tensors
        self.blocks = []
        for i in range(L):
            p = "blk.%d." % i
            b = {"attn_norm": W(p + "attn_norm.weight", (D,), True), "ffn_norm": W(p + "ffn_norm.weight", (D,), True),
                 "wq": W(p + "attn_q.weight", (H * hd, D)), "wk": W(p + "attn_k.weight", (KV * hd, D)),
                 "wv": W(p + "attn_v.weight", (KV * hd, D)), "wo": W(p + "attn_output.weight", (D, H * hd))}
            for n, m in (("bq", H * hd), ("bk", KV * hd), ("bv", KV * hd)):
                key = p + "attn_" + n[1] + ".bias"
                b[n] = W(key, (m,)) if key in g.tensors else None
            if c.experts:
                E = c.experts
                b["router"] = W(p + "ffn_gate_inp.weight", (E, D))
                eg = g.tensors.get(p + "ffn_gate_exps.weight")
                if eg is None:
                    raise ModelError("%s: tensor %sffn_gate_exps.weight is missing" % (g.path, p))
                Fh = eg.ne[1]
                b["eg"] = W(p + "ffn_gate_exps.weight", (E, Fh, D))
                b["eu"] = W(p + "ffn_up_exps.weight", (E, Fh, D))
                b["ed"] = W(p + "ffn_down_exps.weight", (E, D, Fh))
            else:
                gt = g.tensors.get(p + "ffn_gate.weight")
                if gt is None:
                    raise ModelError("%s: tensor %sffn_gate.weight is missing" % (g.path, p))
                Fh = gt.ne[1]
                b["gate"] = W(p + "ffn_gate.weight", (Fh, D))
                b["up"] = W(p + "ffn_up.weight", (Fh, D))
                b["down"] = W(p + "ffn_down.weight", (D, Fh))
            self.blocks.append(b)
        self.hidden = Fh
        # RoPE tables over the whole context: angle in float64, cos/sin cast to the compute dtype
        pos = torch.arange(c.ctx, dtype=torch.float64)
        ang = pos[:, None] * torch.tensor(c.rope_freq, dtype=torch.float64)[None, :]
        self.cos = torch.cos(ang).to(self.device, dtype)
        self.sin = torch.sin(ang).to(self.device, dtype)
        self.scale = 1.0 / math.sqrt(hd)
        self.scale = float(torch.tensor(self.scale, dtype=torch.float32))

    # ---- pieces
    def _rms(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * w).to(self.dtype)

    def _rope(self, x, cos, sin):
        """x (B, h, T, hd); cos/sin (B, 1, T, n_rot/2)"""
        c = self.cfg
        half = c.n_rot // 2
        xr, rest = x[..., :c.n_rot], x[..., c.n_rot:]
        if c.neox:
            x0, x1 = xr[..., :half], xr[..., half:]
            out = torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)
        else:
            p = xr.reshape(*xr.shape[:-1], half, 2)
            x0, x1 = p[..., 0], p[..., 1]
            out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(xr.shape)
        return torch.cat([out, rest], -1) if rest.shape[-1] else out

    def _attend(self, q, k, v, mask):
        """q (B, H, Tq, hd), k/v (B, H, Tk, hd), mask (B, 1, Tq, Tk) bool (True = attend); None (SDPA only) when
        the plain causal form is exact: one query over the whole cache, or a prefill from column 0 unpadded."""
        if self.attn == "sdpa":
            with sdpa_context(self.sdpa_backend):
                if mask is None:  # the only forms the flash backend takes
                    if q.shape[2] == 1:
                        return F.scaled_dot_product_attention(q, k, v)
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        sc = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        sc = sc.float().masked_fill(~mask, float("-inf"))
        return torch.matmul(torch.softmax(sc, -1).to(v.dtype), v)

    def _moe(self, b, h):
        c = self.cfg
        N, D = h.shape
        K = c.experts_used
        pr = torch.softmax((h @ b["router"].t()).float(), -1)
        tv, ti = pr.topk(K, -1)  # (N, K), descending; ties: lower index
        w = (tv / tv.sum(-1, keepdim=True)).to(h.dtype)
        slot = torch.zeros(N, K, D, dtype=h.dtype, device=h.device)
        for e in range(c.experts):
            rows, ks = (ti == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            x = h[rows]
            y = (F.silu(x @ b["eg"][e].t()) * (x @ b["eu"][e].t())) @ b["ed"][e].t()
            slot[rows, ks] = y
        out = slot[:, 0] * w[:, 0:1]
        for k in range(1, K):
            out = out + slot[:, k] * w[:, k:k + 1]
        return out

    # ---- forward
    def new_cache(self, B, cols):
        c = self.cfg
        shape = (B, c.kv_heads, cols, c.head_dim)
        return {"k": [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(c.layers)],
                "v": [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(c.layers)], "len": 0}

    @staticmethod
    def compact(cache, keep):
        """cache rows keep (a list of row indices) only."""
        idx = None
        for name in ("k", "v"):
            for i, t in enumerate(cache[name]):
                if idx is None:
                    idx = torch.tensor(keep, dtype=torch.long, device=t.device)
                cache[name][i] = t.index_select(0, idx)

    @torch.no_grad()
    def forward(self, ids, pad, cache, all_logits=False):
        """ids (B, T) long on device: the next T columns of each row; pad (B,) long: each row's left padding
        (columns before it are never attended to). Returns float32 logits (B, V) of the last column, or
        (B, T, V) with all_logits."""
        c = self.cfg
        B, T = ids.shape
        t0 = cache["len"]
        Tk = t0 + T
        cols = torch.arange(t0, Tk, device=self.device)
        pos = (cols[None, :] - pad[:, None]).clamp(min=0)  # (B, T)
        cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]
        kcols = torch.arange(Tk, device=self.device)
        causal_only = bool((pad == 0).all()) and c.sliding_window <= 0 and (T == 1 or t0 == 0)
        mask = None
        if not (causal_only and self.attn == "sdpa"):
            m = (kcols[None, None, :] <= cols[None, :, None]) & (kcols[None, None, :] >= pad[:, None, None])  # (B, T, Tk)
            if c.sliding_window > 0:
                m = m & (kcols[None, None, :] > cols[None, :, None] - c.sliding_window)
            m = m | (kcols[None, None, :] == cols[None, :, None])
            mask = m[:, None]
        H, KV, hd = c.heads, c.kv_heads, c.head_dim
        x = F.embedding(ids, self.tok_embd)
        for li, b in enumerate(self.blocks):
            h = self._rms(x, b["attn_norm"])
            q = F.linear(h, b["wq"], b["bq"]).view(B, T, H, hd).transpose(1, 2)
            k = F.linear(h, b["wk"], b["bk"]).view(B, T, KV, hd).transpose(1, 2)
            v = F.linear(h, b["wv"], b["bv"]).view(B, T, KV, hd).transpose(1, 2)
            q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            cache["k"][li][:, :, t0:Tk] = k
            cache["v"][li][:, :, t0:Tk] = v
            kk, vv = cache["k"][li][:, :, :Tk], cache["v"][li][:, :, :Tk]
            if KV != H:
                kk = kk.repeat_interleave(H // KV, dim=1)
                vv = vv.repeat_interleave(H // KV, dim=1)
            a = self._attend(q, kk, vv, mask)
            x = x + F.linear(a.transpose(1, 2).reshape(B, T, H * hd), b["wo"])
            h = self._rms(x, b["ffn_norm"])
            if c.experts:
                x = x + self._moe(b, h.reshape(B * T, -1)).view(B, T, -1)
            else:
                x = x + F.linear(F.silu(F.linear(h, b["gate"])) * F.linear(h, b["up"]), b["down"])
        cache["len"] = Tk
        x = x if all_logits else x[:, -1:]
        x = self._rms(x, self.output_norm)
        lg = F.linear(x, self.output).float()
        return lg if all_logits else lg[:, 0]


def load(path, device="cpu", dtype=torch.float32, attn="math", sdpa_backend=None):
    g = gguf_reader.GGUFFile(path)
    try:
        return g, Model(g, device, dtype, attn, sdpa_backend)
    except (gguf_reader.GGUFError, ModelError):
        g.close()
        raise
