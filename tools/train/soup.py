"""soup.py - weight averaging of two GGUF files of one architecture (a "model soup" / WiSE-FT
interpolation between a model and its own continued training), and the logits fixture of the result.

    python3 tools/train/soup.py A.gguf B.gguf ALPHA TRAIN.json OUT.gguf --name NAME [--fixture OUT.logits.json]

Every tensor of OUT is (1 - ALPHA) * A + ALPHA * B, computed in float64 and stored in the tensors' own
type (F16 matrices, F32 norms/biases/router); the metadata is model_kv of TRAIN.json's "train.config"
(what train.py wrote for B) with general.name NAME, so tokenizer and hyperparameters are the training's.
--fixture writes tests/data/models/NAME.logits.json's form: a PyTorch float64 CPU forward of OUT's own
weights on train.FIXTURE_PROMPTS (needs torch; the rest needs only numpy).

The shipped llama-moe-6m of session 4 is models/llama-moe-6m.gguf as of commit 9486912 (A) averaged
with its 150 s code-heavy continued training (B) at ALPHA 0.3 (models/MODELS.md)."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gguf_export  # noqa: E402

TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".traindata", "v2", "tokenizer.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("alpha", type=float)
    ap.add_argument("train_json")
    ap.add_argument("out")
    ap.add_argument("--name", required=True)
    ap.add_argument("--tok", default=TOKENIZER)
    ap.add_argument("--fixture", default="")
    a = ap.parse_args()
    if not 0.0 <= a.alpha <= 1.0:
        sys.exit("soup.py: ALPHA must be within [0, 1]")
    with open(a.train_json) as f:
        cfg = json.load(f)["train"]["config"]
    tok = bpe.Tokenizer.load(a.tok)
    A, B = gguf_export.read_tensors(a.a), gguf_export.read_tensors(a.b)
    if list(A) != list(B):
        sys.exit("soup.py: %s and %s hold different tensors" % (a.a, a.b))
    out = []
    for name, (ne, typ, da) in A.items():
        neb, typb, db = B[name]
        if ne != neb or typ != typb:
            sys.exit("soup.py: tensor %s differs in shape or type" % name)
        dt = np.float16 if typ == gguf_export.GGML_F16 else np.float32
        x = np.frombuffer(da, dtype=dt).astype(np.float64)
        y = np.frombuffer(db, dtype=dt).astype(np.float64)
        out.append((name, ne, typ, ((1.0 - a.alpha) * x + a.alpha * y).astype(dt).tobytes()))
    gguf_export.write(a.out, gguf_export.model_kv(cfg, tok, a.name), out)
    print("soup.py: wrote %s = %.3g x %s + %.3g x %s" % (a.out, 1.0 - a.alpha, a.a, a.alpha, a.b))
    if a.fixture:
        import torch
        import train
        model = train.build_model(torch, cfg, len(tok.tokens))
        train.load_gguf_weights(torch, model, cfg, a.out)
        model.eval()
        fx = train.logits_fixture(torch, model.double(), tok, os.path.basename(a.out), train.FIXTURE_PROMPTS)
        with open(a.fixture, "w") as f:
            json.dump(fx, f)
        print("soup.py: wrote", a.fixture)


if __name__ == "__main__":
    main()
