"""tok_from_gguf.py - the BPE tokenizer JSON (bpe.Tokenizer.save's format) read back out of a shipped GGUF.

The tokenizer file the shipped models were trained with (.traindata/v2/tokenizer.json) is not in the
repository, but every model file carries it: tokens, merges, token types (3 = control: the specials)
and the pre-tokenizer name. Continued trainings (multi_data.py's fragile models) take it from there,
so they tokenize exactly as the model they start from.

  python3 tok_from_gguf.py MODEL.gguf OUT.json
"""
import json
import struct
import sys

import gguf_export as G

SCALAR = {G.T_UINT8: "<B", G.T_INT8: "<b", G.T_UINT16: "<H", G.T_INT16: "<h", G.T_UINT32: "<I", G.T_INT32: "<i",
          G.T_FLOAT32: "<f", G.T_BOOL: "<?", G.T_UINT64: "<Q", G.T_INT64: "<q", G.T_FLOAT64: "<d"}


def read_kv(path):
    """{key: value} of a GGUF file's metadata (arrays as lists)"""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:4] != G.GGUF_MAGIC:
        raise ValueError("%s: not a GGUF file" % path)
    _, _, n_kv = struct.unpack_from("<IQQ", buf, 4)
    pos = 24

    def val(t, p):
        if t == G.T_STRING:
            (n,) = struct.unpack_from("<Q", buf, p)
            return buf[p + 8:p + 8 + n].decode("utf-8"), p + 8 + n
        if t == G.T_ARRAY:
            et, n = struct.unpack_from("<IQ", buf, p)
            p += 12
            out = []
            for _ in range(n):
                v, p = val(et, p)
                out.append(v)
            return out, p
        (v,) = struct.unpack_from(SCALAR[t], buf, p)
        return v, p + struct.calcsize(SCALAR[t])

    kv = {}
    for _ in range(n_kv):
        (kl,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + kl].decode()
        (t,) = struct.unpack_from("<I", buf, pos + 8 + kl)
        kv[key], pos = val(t, pos + 12 + kl)
    return kv


def tokenizer_json(path):
    kv = read_kv(path)
    toks, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    return {"tokens": toks, "merges": kv["tokenizer.ggml.merges"], "specials": [t for t, ty in zip(toks, types) if ty == 3],
            "pre": kv["tokenizer.ggml.pre"]}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tok_from_gguf.py MODEL.gguf OUT.json")
    d = tokenizer_json(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        json.dump(d, f)
    print("%s: %d tokens, %d merges, specials %s, pre %s" % (sys.argv[2], len(d["tokens"]), len(d["merges"]), d["specials"], d["pre"]))


if __name__ == "__main__":
    main()
