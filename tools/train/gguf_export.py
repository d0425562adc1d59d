"""gguf_export.py - writes GGUF v3 files (llama.cpp's layout and keys).

Pure Python (struct only). A tensor is given as (name, ne, ggml_type, data)
where ne is llama.cpp's dimension order (ne[0] = the contiguous, innermost
dimension: a PyTorch Linear weight of shape (out, in) has ne = [in, out]),
and data the little-endian bytes of the elements in that order.

Metadata follows llama.cpp's conversion scripts: general.architecture,
{arch}.context_length / embedding_length / block_count /
feed_forward_length / attention.head_count / attention.head_count_kv /
rope.freq_base / attention.layer_norm_rms_epsilon (and expert_count /
expert_used_count for MoE), tokenizer.ggml.* for a "gpt2" byte-level BPE.
"""
import struct

GGUF_MAGIC = b"GGUF"
ALIGN = 32
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
TYPE_SIZE = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}


class U32(int):
    pass


class I32(int):
    pass


class F32(float):
    pass


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _scalar(v):
    """(type, bytes) of a scalar value; plain int -> UINT32, float -> FLOAT32."""
    if isinstance(v, bool):
        return T_BOOL, struct.pack("<B", 1 if v else 0)
    if isinstance(v, I32):
        return T_INT32, struct.pack("<i", v)
    if isinstance(v, int):
        return T_UINT32, struct.pack("<I", v)
    if isinstance(v, float):
        return T_FLOAT32, struct.pack("<f", v)
    if isinstance(v, str):
        return T_STRING, _str(v)
    raise TypeError("unsupported metadata value %r" % (v,))


def _value(v):
    if isinstance(v, (list, tuple)):
        if not v:
            raise ValueError("empty metadata array")
        et, _ = _scalar(v[0])
        parts = []
        for x in v:
            t, b = _scalar(x)
            if t != et:
                raise TypeError("mixed array element types")
            parts.append(b)
        return T_ARRAY, struct.pack("<IQ", et, len(v)) + b"".join(parts)
    return _scalar(v)


def write(path, kv, tensors):
    """kv: list of (key, value) in file order; tensors: list of (name, ne, type, bytes)."""
    head = [GGUF_MAGIC, struct.pack("<IQQ", 3, len(tensors), len(kv))]
    for k, v in kv:
        t, b = _value(v)
        head.append(_str(k) + struct.pack("<I", t) + b)
    off = 0
    offsets = []
    for name, ne, typ, data in tensors:
        n = 1
        for d in ne:
            n *= d
        if len(data) != n * TYPE_SIZE[typ]:
            raise ValueError("tensor %s: %d bytes for %d elements of type %d" % (name, len(data), n, typ))
        offsets.append(off)
        head.append(_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", typ, off))
        off += len(data)
        off = (off + ALIGN - 1) // ALIGN * ALIGN
    with open(path, "wb") as f:
        h = b"".join(head)
        f.write(h)
        f.write(b"\0" * ((-len(h)) % ALIGN))
        pos = 0
        for (name, ne, typ, data), o in zip(tensors, offsets):
            f.write(b"\0" * (o - pos))
            f.write(data)
            pos = o + len(data)


CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")


def model_kv(cfg, tok, name):
    """Metadata list for a model config dict and a bpe.Tokenizer."""
    a = cfg["arch"]
    kv = [
        ("general.architecture", a),
        ("general.name", name),
        ("general.alignment", ALIGN),
        ("general.file_type", 1),  # mostly F16
        (a + ".context_length", cfg["ctx"]),
        (a + ".embedding_length", cfg["dim"]),
        (a + ".block_count", cfg["layers"]),
        (a + ".feed_forward_length", cfg["hidden"]),
        (a + ".attention.head_count", cfg["heads"]),
        (a + ".attention.head_count_kv", cfg["kv_heads"]),
        (a + ".rope.freq_base", float(cfg["rope_theta"])),
        (a + ".rope.dimension_count", cfg["dim"] // cfg["heads"]),
        (a + ".attention.layer_norm_rms_epsilon", float(cfg["eps"])),
    ]
    if cfg.get("experts"):
        kv += [(a + ".expert_count", cfg["experts"]), (a + ".expert_used_count", cfg["experts_used"])]
    eot = tok.special("<|endoftext|>")
    kv += [
        ("tokenizer.ggml.model", "gpt2"),
        # llama.cpp's names: "gpt-2" for GPT-2's regex (its "default" is another), "qwen2" splits digits
        ("tokenizer.ggml.pre", getattr(tok, "pre", "gpt-2")),
        ("tokenizer.ggml.tokens", list(tok.tokens)),
        ("tokenizer.ggml.token_type", [I32(3 if t in tok.specials else 1) for t in tok.tokens]),
        ("tokenizer.ggml.merges", list(tok.merges)),
        ("tokenizer.ggml.bos_token_id", eot),
        ("tokenizer.ggml.eos_token_id", eot),
        ("tokenizer.ggml.padding_token_id", eot),
        ("tokenizer.ggml.add_bos_token", True),
        ("tokenizer.chat_template", CHAT_TEMPLATE),
    ]
    return kv


def f16_bytes(values):
    return struct.pack("<%de" % len(values), *values)


def f32_bytes(values):
    return struct.pack("<%df" % len(values), *values)


def random_model(path, arch, tok, seed=1, dim=32, layers=2, heads=4, kv_heads=2, hidden=48, experts=0, experts_used=0):
    """A small random model (for the tokenizer/loader checks on machines without PyTorch)."""
    import random
    rng = random.Random(seed)
    cfg = dict(arch=arch, ctx=4096, dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, hidden=hidden, rope_theta=10000.0,
               eps=1e-5, experts=experts, experts_used=experts_used)
    hd = dim // heads

    def m(name, *ne):
        n = 1
        for d in ne:
            n *= d
        return (name, list(ne), GGML_F16, f16_bytes([rng.gauss(0, 0.2) for _ in range(n)]))

    def v(name, n, c=None):
        return (name, [n], GGML_F32, f32_bytes([c if c is not None else rng.gauss(0, 0.1) for _ in range(n)]))

    ts = [m("token_embd.weight", dim, len(tok.tokens)), v("output_norm.weight", dim, 1.0)]
    for l in range(layers):
        p = "blk.%d." % l
        ts += [v(p + "attn_norm.weight", dim, 1.0), m(p + "attn_q.weight", dim, heads * hd), m(p + "attn_k.weight", dim, kv_heads * hd),
               m(p + "attn_v.weight", dim, kv_heads * hd), m(p + "attn_output.weight", heads * hd, dim), v(p + "ffn_norm.weight", dim, 1.0)]
        if arch == "qwen2":
            ts += [v(p + "attn_q.bias", heads * hd), v(p + "attn_k.bias", kv_heads * hd), v(p + "attn_v.bias", kv_heads * hd)]
        if experts:
            ts += [("%sffn_gate_inp.weight" % p, [dim, experts], GGML_F32, f32_bytes([rng.gauss(0, 0.3) for _ in range(dim * experts)])),
                   m(p + "ffn_gate_exps.weight", dim, hidden, experts), m(p + "ffn_up_exps.weight", dim, hidden, experts),
                   m(p + "ffn_down_exps.weight", hidden, dim, experts)]
        else:
            ts += [m(p + "ffn_gate.weight", dim, hidden), m(p + "ffn_up.weight", dim, hidden), m(p + "ffn_down.weight", hidden, dim)]
    write(path, model_kv(cfg, tok, "random-" + arch), ts)


if __name__ == "__main__":
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bpe
    tk = bpe.Tokenizer.load(sys.argv[1])
    out = sys.argv[2]
    random_model(out + "/rand-llama.gguf", "llama", tk)
    random_model(out + "/rand-qwen2.gguf", "qwen2", tk, kv_heads=4)
    random_model(out + "/rand-moe.gguf", "llama", tk, experts=4, experts_used=2)


def read_tensors(path):
    """{name: (ne, type, bytes)} of a GGUF file written by write() (or any GGUF v3 with these value types)."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:4] != GGUF_MAGIC:
        raise ValueError("%s: not a GGUF file" % path)
    ver, n_t, n_kv = struct.unpack_from("<IQQ", buf, 4)
    pos = 24
    sizes = {T_UINT8: 1, T_INT8: 1, T_UINT16: 2, T_INT16: 2, T_UINT32: 4, T_INT32: 4, T_FLOAT32: 4, T_BOOL: 1, T_UINT64: 8,
             T_INT64: 8, T_FLOAT64: 8}

    def skip(t, p):
        if t == T_STRING:
            (n,) = struct.unpack_from("<Q", buf, p)
            return p + 8 + n
        if t == T_ARRAY:
            et, n = struct.unpack_from("<IQ", buf, p)
            p += 12
            if et in sizes:
                return p + n * sizes[et]
            for _ in range(n):
                p = skip(et, p)
            return p
        return p + sizes[t]

    align = ALIGN
    for _ in range(n_kv):
        (kl,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + kl].decode()
        pos += 8 + kl
        (t,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if key == "general.alignment":
            (align,) = struct.unpack_from("<I", buf, pos)
        pos = skip(t, pos)
    infos = []
    for _ in range(n_t):
        (nl,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + nl].decode()
        pos += 8 + nl
        (nd,) = struct.unpack_from("<I", buf, pos)
        ne = list(struct.unpack_from("<%dQ" % nd, buf, pos + 4))
        pos += 4 + 8 * nd
        typ, off = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        infos.append((name, ne, typ, off))
    base = (pos + align - 1) // align * align
    out = {}
    for name, ne, typ, off in infos:
        n = 1
        for d in ne:
            n *= d
        out[name] = (ne, typ, buf[base + off:base + off + n * TYPE_SIZE[typ]])
    return out
