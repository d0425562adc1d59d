#!/usr/bin/env python3
"""fuzz_gguf.py - the server's GGUF reader and tokenizer set-up on corrupted files: every outcome must be a
clean load or a GGUFError / TokenizerError (what serve.py turns into "error: ..." and exit 2), never another
exception, a hang or a huge allocation.

  python3 tools/torch_server/fuzz_gguf.py MODEL.gguf [N] [SEED]

Mutations (deterministic for a seed): truncation at a random length; random bytes overwritten in the header,
metadata and tensor-info region; a random 8-byte length / count field set to a huge or off-by-one value. Each
mutant's tensors are all read too (dequantised), so data offsets past the end are caught. numpy only.
"""
import os
import random
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_reader  # noqa: E402
import tokenizer  # noqa: E402


def one(path):
    g = gguf_reader.GGUFFile(path)
    try:
        tokenizer.Tokenizer(g.kv, path)
    except tokenizer.TokenizerError:
        pass
    for name in list(g.tensors)[:8]:
        g.tensor(name)
    g.close()


def main():
    src = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    data = open(src, "rb").read()
    g = gguf_reader.GGUFFile(src)
    head = g.data_start
    g.close()
    bad = ok = rejected = 0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.gguf")
        for i in range(n):
            b = bytearray(data)
            kind = i % 3
            if kind == 0:
                b = b[:rng.randrange(0, len(b))]
            elif kind == 1:
                for _ in range(rng.randint(1, 16)):
                    b[rng.randrange(0, head)] = rng.randrange(256)
            else:
                at = rng.randrange(4, head - 8)
                (v,) = struct.unpack_from("<Q", b, at)
                struct.pack_into("<Q", b, at, rng.choice([v + 1, v - 1 if v else 1, 1 << 62, (1 << 64) - 1, 1 << 33]))
            with open(path, "wb") as f:
                f.write(b)
            try:
                one(path)
                ok += 1
            except (gguf_reader.GGUFError, tokenizer.TokenizerError):
                rejected += 1
            except Exception as e:  # noqa: BLE001 - the point: nothing else may escape
                bad += 1
                print("mutant %d (kind %d): %s: %s" % (i, kind, type(e).__name__, e))
    print("fuzz_gguf: %d mutants: %d loaded, %d rejected cleanly, %d other exceptions" % (n, ok, rejected, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
