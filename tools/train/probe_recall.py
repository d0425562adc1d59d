"""probe_recall.py - does a small transformer learn one-token-key recall, and does copying practice help?

A CPU probe (Debian's python3-torch is enough) with train.py's model at 2 layers x 64 (4 heads), trained from
scratch on synthetic token sequences, printing loss and accuracy every 100 steps:

  recall  N records "key value SEP" (keys distinct, 60 of them; values from 60), then Q queries "1 key value":
          the loss is on each query's value, which only a lookup of the key's earlier place can predict. This is
          the built-in long suite's task in miniature (code word, then its city).
  register  (--task register) the built-in long suite itself at --lines LO-HI lines, 4 questions a document,
          with the shipped tokenizer (--tok; the vocabulary is its size): the loss and accuracy are on the
          asked cities only
  copy    random tokens, then a copy of what came before (--copy-mode whole: one whole sequence of --copy-len
          tokens repeated at a random offset; spans: --copies spans of 16 tokens copied from a base of
          --copy-len tokens), tokens from --copy-vocab of the --vocab ids: the loss is on every copied token
          but the first, i.e. what an induction head predicts.

    /usr/bin/python3 tools/train/probe_recall.py --copy-steps 600 --steps 1200          # copy first, then recall
    /usr/bin/python3 tools/train/probe_recall.py --copy-steps 0 --steps 4000            # recall alone
    /usr/bin/python3 tools/train/probe_recall.py --copy-steps 800 --steps 800 --vocab 2017 --copy-mode spans --copy-len 128
    /usr/bin/python3 tools/train/probe_recall.py --task register --copy-steps 900 --steps 1300 --batch 16

Measured in session 5 (models/MODELS.md, "Session 5"): recall alone 0.22 after 4,000 steps (16 queries); with
600 copy steps first (whole mode, vocabulary 136) the copying reached 0.98 by step 500 and recall 1.00 within
100 steps after it."""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=("recall", "register"), default="recall")
    ap.add_argument("--tok", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".traindata",
                                                  "v2", "tokenizer.json"), help="register: the tokenizer")
    ap.add_argument("--lines", default="2-8", help="register: lines a document, LO-HI")
    ap.add_argument("--steps", type=int, default=1200, help="total steps (copy steps included)")
    ap.add_argument("--copy-steps", type=int, default=600, help="the first steps on copying examples")
    ap.add_argument("--records", type=int, default=16)
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=136)
    ap.add_argument("--copy-vocab", type=int, default=0, help="ids the copied tokens come from (0: all but 0-5)")
    ap.add_argument("--copy-mode", choices=("whole", "spans"), default="whole")
    ap.add_argument("--copy-len", type=int, default=40)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arch", default="", help="train.py's CONFIGS[ARCH] instead of the 2 x 64 probe (with --init: its weights)")
    ap.add_argument("--init", default="", help="start from this GGUF (a shipped model; needs --arch and --task register)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    V, K0, V0, SEP, QRY = a.vocab, 6, 70, 5, 1
    gen = None
    if a.task == "register":
        import bpe
        tok = bpe.Tokenizer.load(a.tok)
        gen, V = train.LongGen(tok, check=False), len(tok.tokens)
        lo, hi = (int(x) for x in a.lines.split("-"))
    assert V >= V0 + 60, "--vocab must be at least 130 (keys 6-65, values 70-129)"
    assert a.copy_mode == "whole" or a.copy_len > 16, "--copy-mode spans copies 16-token spans: --copy-len must exceed 16"
    cfg = dict(arch="llama", dim=64, layers=2, heads=4, kv_heads=4, hidden=128, experts=0, experts_used=0, ctx=4096,
               rope_theta=10000.0, eps=1e-5)
    if a.arch:
        cfg.update(train.CONFIGS[a.arch])
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    model = train.build_model(torch, cfg, V)
    if a.init:
        assert a.arch and gen, "--init needs --arch and --task register (the shipped tokenizer)"
        train.load_gguf_weights(torch, model, cfg, a.init)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    pool = list(range(6, V))
    if gen:
        pool = [i for i in range(V) if tok.tokens[i] not in tok.specials]
    if a.copy_vocab:
        pool = random.Random(a.seed + 1).sample(pool, a.copy_vocab)

    def recall():
        rows, tgt = [], []
        for _ in range(a.batch):
            ks = rng.sample(range(K0, K0 + 60), a.records)
            vs = [rng.randrange(V0, V0 + 60) for _ in ks]
            seq = [0]
            for k, v in zip(ks, vs):
                seq += [k, v, SEP]
            t = [-100] * len(seq)
            for q in (rng.randrange(a.records) for _ in range(a.queries)):
                seq += [QRY, ks[q], vs[q]]
                t += [-100, -100, vs[q]]
            rows.append(seq)
            tgt.append(t)
        return rows, tgt

    def register():
        rows, tgt = [], []
        for _ in range(a.batch):
            ids, m = gen.example(rng, rng.randint(lo, hi), 4)
            rows.append(ids)
            tgt.append([x if k == 2 and x != gen.eot else -100 for x, k in zip(ids, m)])  # the cities
        return rows, tgt

    def copying():
        rows, tgt = [], []
        for _ in range(a.batch):
            if a.copy_mode == "whole":
                r = [rng.choice(pool) for _ in range(a.copy_len)]
                gap = rng.randrange(0, 60)
                fill = [rng.choice(pool) for _ in range(gap)]
                pad = [rng.choice(pool) for _ in range(60 - gap)]
                rows.append([0] + r + fill + r + pad)
                tgt.append([-100] * (2 + a.copy_len + gap) + r[1:] + [-100] * len(pad))
            else:
                ids, m = train.induction_example(rng, pool, a.copy_len, mode="spans", n_copies=a.copies)
                rows.append(ids)
                tgt.append([x if k == 2 else -100 for x, k in zip(ids, m)])
        return rows, tgt

    t0 = time.time()
    for step in range(a.steps + 1):
        kind = "copy" if step < a.copy_steps else a.task
        rows, tgt = copying() if kind == "copy" else recall() if kind == "recall" else register()
        L = max(len(r) for r in rows)
        x = torch.tensor([r + [0] * (L - len(r)) for r in rows])
        y = torch.tensor([t + [-100] * (L - len(t)) for t in tgt])
        m = y[:, 1:] != -100
        logits = model(x[:, :-1])[m]
        ce = torch.nn.functional.cross_entropy(logits, y[:, 1:][m])
        opt.zero_grad()
        ce.backward()
        opt.step()
        if step % 100 == 0:
            acc = float((logits.argmax(-1) == y[:, 1:][m]).float().mean())
            print("%-6s step %5d  %4.0f s  loss %.3f  accuracy %.3f" % (kind, step, time.time() - t0, float(ce), acc),
                  flush=True)


if __name__ == "__main__":
    main()
