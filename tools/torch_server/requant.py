"""requant.py IN.gguf OUT.gguf Q8_0|Q4_0|rand - a GGUF with its 2-D F16 tensors re-encoded, to check the
server's dequantisers (gguf_reader.py) against the engine's on the same bytes:

  Q8_0, Q4_0  ggml's reference rounding (Q8_0: d = amax/127, q = round(x/d); Q4_0: d = max/-8 with max the
              signed value of largest magnitude, q = min(15, int(x/d + 8.5))): a usable quantised model
  rand        random bits in Q4_K / Q5_K / Q6_K blocks (round robin over the tensors), with d / dmin chosen so the
              weights stay small: a meaningless model whose every block layout detail still shows in the logits

Then compare `driftbench generate --model OUT.gguf --profile ref --logprobs K` with the server's logprobs.
Metadata bytes are copied as they are; tensor infos and data are rewritten. numpy only.
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_reader as G  # noqa: E402

if len(sys.argv) != 4 or sys.argv[3] not in ("Q8_0", "Q4_0", "rand"):
    sys.exit("usage: requant.py IN.gguf OUT.gguf Q8_0|Q4_0|rand")
src, dst, qt = sys.argv[1:4]
g = G.GGUFFile(src)
buf = bytes(g._mm)
first = next(iter(g.tensors))
key = struct.pack("<Q", len(first)) + first.encode()
kv_end = buf.index(key, 24)
out_infos, datas, off = [], [], 0
for name, ti in g.tensors.items():
    raw = bytes(g.raw(name))
    typ = ti.type
    if qt == "rand" and ti.type == G.F16 and len(ti.ne) >= 2:
        n = 1
        for d_ in ti.ne: n *= d_
        rng = np.random.default_rng(len(out_infos))
        typ = [G.Q4_K, G.Q5_K, G.Q6_K][len(out_infos) % 3]
        per, nbb, _ = G.BLOCK[typ]
        blk = rng.integers(0, 256, size=(n // per, nbb), dtype=np.uint8)
        f16 = lambda v: np.full((n // per, 1), v, np.float16).view(np.uint8).reshape(-1, 2)
        if typ == G.Q4_1: blk[:, 0:2] = f16(0.1 / 15); blk[:, 2:4] = f16(-0.05)
        if typ == G.Q5_0: blk[:, 0:2] = f16(0.1 / 31)
        if typ == G.Q5_1: blk[:, 0:2] = f16(0.1 / 31); blk[:, 2:4] = f16(-0.05)
        if typ == G.Q4_K: blk[:, 0:2] = f16(0.1 / (63 * 15)); blk[:, 2:4] = f16(0.05 / 63)
        if typ == G.Q5_K: blk[:, 0:2] = f16(0.1 / (63 * 31)); blk[:, 2:4] = f16(0.05 / 63)
        if typ == G.Q6_K: blk[:, 208:210] = f16(0.1 / (128 * 32))
        raw = blk.tobytes()
    elif ti.type == G.F16 and len(ti.ne) >= 2 and ti.ne[0] % 32 == 0:
        x = g.tensor(name).reshape(-1, 32).astype(np.float32)
        if qt == "Q8_0":
            amax = np.abs(x).max(1)
            d = amax / 127
            idd = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0)
            q = np.round(x * idd[:, None]).astype(np.int8)
            blk = np.concatenate([d.astype(np.float16).view(np.uint8).reshape(-1, 2), q.view(np.uint8)], 1)
            typ = G.Q8_0
        else:
            i = np.abs(x).argmax(1)
            mx = x[np.arange(x.shape[0]), i]
            d = mx / -8
            idd = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0)
            q = np.minimum(15, (x * idd[:, None] + 8.5).astype(np.int32)).astype(np.uint8)
            qs = q[:, :16] | (q[:, 16:] << 4)
            blk = np.concatenate([d.astype(np.float16).view(np.uint8).reshape(-1, 2), qs], 1)
            typ = G.Q4_0
        raw = blk.tobytes()
    out_infos.append(struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ti.ne)) + b"".join(struct.pack("<Q", d) for d in ti.ne) + struct.pack("<IQ", typ, off))
    datas.append((off, raw))
    off = (off + len(raw) + 31) // 32 * 32
head = buf[:kv_end] + b"".join(out_infos)
with open(dst, "wb") as f:
    f.write(head); f.write(b"\0" * ((-len(head)) % 32))
    pos = 0
    for o, r in datas:
        f.write(b"\0" * (o - pos)); f.write(r); pos = o + len(r)
print(dst, qt, "ok")
