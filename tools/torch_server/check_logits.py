#!/usr/bin/env python3
"""check_logits.py - the PyTorch forward pass (model.py) against the reference logits of the shipped models.

tests/data/models/NAME.logits.json holds, for a few prompts, the token ids ([BOS] + prompt) and the logits at
two positions from a float64 PyTorch forward of the GGUF's weights (tools/train/train.py logits_fixture). This
prints, per fixture and setting, the largest |logit - reference| and whether the argmax agrees, so a dtype /
attention / device setting's distance from exact arithmetic is a number:

  /usr/bin/python3 tools/torch_server/check_logits.py tests/data/models/*.logits.json
  python3 tools/torch_server/check_logits.py --device cuda --dtype bf16 --attn sdpa tests/data/models/qwen2-7m.logits.json

The model of NAME.logits.json is NAME.gguf in --models (default models/).
Exit 1 when an argmax disagrees or a difference passes --max-abs (default: no limit), 2 on bad input.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fixtures", nargs="+")
    ap.add_argument("--models", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--attn", default="math", choices=["math", "sdpa"])
    ap.add_argument("--sdpa-backend", default="auto", choices=["auto", "flash", "efficient", "math"])
    ap.add_argument("--tf32", default="off", choices=["on", "off"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-abs", type=float, default=None)
    a = ap.parse_args()
    import numpy as np
    import torch
    import model as model_mod
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "cuda":
        model_mod.set_tf32(a.tf32 == "on")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    bad = 0
    for fx_path in a.fixtures:
        try:
            fx = json.load(open(fx_path))
            name = os.path.basename(fx_path).replace(".logits.json", ".gguf")
            g, md = model_mod.load(os.path.join(a.models, name), a.device, dtype, a.attn, a.sdpa_backend)
        except (OSError, ValueError, KeyError, model_mod.ModelError, Exception) as e:
            print("check_logits: %s: %s" % (fx_path, e), file=sys.stderr)
            return 2
        worst, agree, n = 0.0, 0, 0
        for p in fx["prompts"]:
            ids = torch.tensor([p["ids"]], device=md.device)
            cache = md.new_cache(1, len(p["ids"]))
            lg = md.forward(ids, torch.zeros(1, dtype=torch.long, device=md.device), cache, all_logits=True)[0]
            lg = lg.cpu().numpy().astype(np.float64)
            for j, pos in enumerate(p["positions"]):
                ref = np.array(p["logits"][j])
                worst = max(worst, float(np.abs(lg[pos] - ref).max()))
                agree += int(np.argmax(lg[pos]) == np.argmax(ref))
                n += 1
        print("%-28s %s %s %s%s tf32=%s: max |logit - float64 ref| = %.3g, argmax agrees %d/%d" %
              (os.path.basename(fx_path), a.device, a.dtype, a.attn, "" if a.attn == "math" else "/" + a.sdpa_backend,
               a.tf32, worst, agree, n))
        if agree < n or (a.max_abs is not None and worst > a.max_abs):
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
