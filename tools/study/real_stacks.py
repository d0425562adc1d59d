#!/usr/bin/env python3
"""real_stacks.py - writes the matrix spec of the real-stack study (issue 24).

Three serving stacks that share no code run the same GGUF files: DriftBench's
embedded engine, llama.cpp's llama-server, and tools/torch_server (PyTorch).
Every configuration is one explicit entry of a `driftbench matrix` spec; the
HTTP stacks carry a "server" object, so `driftbench matrix` starts each
server, waits for /health, runs, and stops it. The baseline of every model is
the engine's `ref` profile on the CPU (ref@{model}).

Dimensions (the paper's four, with the stack's real settings as levels):
  model      the file's stem (qwen2-7m, ...)
  hardware   cpu | h200
  precision  f32 | bf16 | fp16 | tf32 | fp8 | f16 | q8_0 | q4_0 | q4_k_m
             (f16 = the shipped F16 file as llama.cpp runs it, q* = a file
             quantized by llama-quantize and served as such by every stack)
  framework  driftbench | llama.cpp | pytorch | pytorch-b16 | pytorch-sdpa
             (pytorch-b16: padded batches of 16 concurrent requests)

    tools/study/real_stacks.py --models DIR_OR_FILES... --quant DIR \
        [--llama-bin DIR] [--python PY] [--gpu] [--threads N] \
        [--math N --code N --safety N --chat N --long N] [--max-tokens N] \
        > matrix.json

--quant DIR holds MODEL-Q8_0.gguf, MODEL-Q4_0.gguf, MODEL-Q4_K_M.gguf (made by
tools/study/run.sh with llama-quantize); a quantization missing there is left
out. Without --llama-bin the llama.cpp stacks are left out, without --python
the PyTorch ones; without --gpu every GPU configuration. Paths are written as
given (absolute paths are safest: servers start in driftbench's directory).
"""
import argparse
import json
import os
import sys

QUANTS = [("q8_0", "Q8_0"), ("q4_0", "Q4_0"), ("q4_k_m", "Q4_K_M")]
# the tensor types the embedded engine reads (src/model/gguf.c); a file that
# llama-quantize mixed another one into is left out of the engine
ENGINE_TYPES = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}


def engine_unreadable(path):
    """the tensor types of a GGUF file the engine cannot read (empty: it can),
    or None when the file cannot be inspected here (no numpy for the reader)"""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch_server"))
    try:
        import gguf_reader
    except ImportError:
        return None
    f = gguf_reader.GGUFFile(path)
    try:
        names = {gguf_reader.BLOCK.get(t.type, (0, 0, f"type {t.type}"))[2] for t in f.tensors.values()}
    finally:
        f.close()
    return sorted(names - ENGINE_TYPES)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", required=True, help="GGUF files or directories of them")
    ap.add_argument("--quant", help="directory of MODEL-Q8_0.gguf, MODEL-Q4_0.gguf, MODEL-Q4_K_M.gguf")
    ap.add_argument("--llama-bin", help="llama.cpp's build/bin (llama-server)")
    ap.add_argument("--python", help="a python3 that imports torch (the PyTorch stack)")
    ap.add_argument("--torch-server", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "torch_server", "serve.py")))
    ap.add_argument("--gpu", action="store_true", help="add the GPU configurations (CUDA)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads per configuration")
    ap.add_argument("--math", type=int, default=200)
    ap.add_argument("--code", type=int, default=164)
    ap.add_argument("--safety", type=int, default=100)
    ap.add_argument("--chat", type=int, default=100)
    ap.add_argument("--long", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--api", default="completions", choices=["completions", "chat"],
                    help="the same API on every stack (default completions: the raw prompt)")
    a = ap.parse_args()

    files = []
    for m in a.models:
        if os.path.isdir(m):
            files += sorted(os.path.join(m, f) for f in os.listdir(m) if f.endswith(".gguf"))
        elif os.path.isfile(m):
            files.append(m)
        else:
            sys.exit(f"real_stacks.py: {m}: no such file or directory")
    if not files:
        sys.exit("real_stacks.py: no GGUF files given")

    t = a.threads
    api = a.api
    configs = []

    def add(label, target, dims, start=None, ready=180):
        c = {"label": label, "target": target, "dims": dims}
        if start:
            # exec: the server is the shell's process itself, so stopping it stops the server
            c["server"] = {"start": "exec " + start, "health": "/health", "ready_timeout_s": ready}
        configs.append(c)

    for path in files:
        m = os.path.splitext(os.path.basename(path))[0]
        qfiles = []
        if a.quant:
            for lvl, q in QUANTS:
                qp = os.path.join(a.quant, f"{m}-{q}.gguf")
                if os.path.isfile(qp):
                    qfiles.append((lvl, qp))

        def dims(hw, prec, fw):
            return {"model": m, "hardware": hw, "precision": prec, "framework": fw}

        def eng(label, spec, d):
            add(f"{label}@{m}", f"embedded:{spec}&api={api}", d)

        # the embedded engine: the baseline, its precisions, the quantized files
        eng("ref", f"{path}?profile=ref&threads={t}", dims("cpu", "f32", "ref"))
        eng("engine-cpu-f32", f"{path}?profile=cpu-f32&threads={t}", dims("cpu", "f32", "driftbench"))
        eng("engine-cpu-bf16", f"{path}?profile=cpu-bf16&threads={t}", dims("cpu", "bf16", "driftbench"))
        eqfiles = []
        for lvl, qp in qfiles:
            bad = engine_unreadable(qp)
            if bad is None:
                print(f"real_stacks.py: {os.path.basename(qp)}: its tensor types are not checked (the GGUF reader "
                      f"needs numpy); a type the engine cannot read stops the matrix", file=sys.stderr)
            if bad:
                print(f"real_stacks.py: {os.path.basename(qp)} holds {', '.join(bad)}, which the engine does not "
                      f"read: its engine configurations are left out", file=sys.stderr)
            else:
                eqfiles.append((lvl, qp))
        for lvl, qp in eqfiles:
            eng(f"engine-cpu-{lvl}", f"{qp}?profile=cpu-f32&threads={t}", dims("cpu", lvl, "driftbench"))
        if a.gpu:
            eng("engine-h200-f32", f"{path}?profile=cuda-f32", dims("h200", "f32", "driftbench"))
            eng("engine-h200-bf16", f"{path}?profile=cuda-bf16", dims("h200", "bf16", "driftbench"))
            eng("engine-h200-fp8", f"{path}?profile=cuda-fp8", dims("h200", "fp8", "driftbench"))
            for lvl, qp in eqfiles:
                eng(f"engine-h200-{lvl}", f"{qp}?profile=cuda-f32", dims("h200", lvl, "driftbench"))

        url = "http://127.0.0.1:{port}/v1?model=" + m + "&api=" + api
        # llama.cpp: one slot, no prompt cache, the seed of each request
        if a.llama_bin:
            srv = os.path.join(a.llama_bin, "llama-server")
            base = f"{srv} --port {{port}} -np 1 --no-cache-prompt --no-webui -c 4096"
            hws = [("cpu", f"-ngl 0 -t {t}")] + ([("h200", "-ngl 99")] if a.gpu else [])
            for hw, extra in hws:
                for lvl, fp in [("f16", path)] + qfiles:
                    add(f"llamacpp-{hw}-{lvl}@{m}", url, dims(hw, lvl, "llama.cpp"),
                        f"{base} -m {fp} {extra}")
        # PyTorch: dtype, TF32, attention implementation, batching
        if a.python:
            ts = f"{a.python} {a.torch_server} --model {path} --name {m} --port {{port}}"
            tc = [("cpu", "fp32", "pytorch", f"--device cpu --threads {t} --dtype fp32"),
                  ("cpu", "bf16", "pytorch", f"--device cpu --threads {t} --dtype bf16"),
                  ("cpu", "fp32", "pytorch-b16", f"--device cpu --threads {t} --dtype fp32 --batch 16")]
            if a.gpu:
                tc += [("h200", "f32", "pytorch", "--device cuda --dtype fp32 --tf32 off"),
                       ("h200", "tf32", "pytorch", "--device cuda --dtype fp32 --tf32 on"),
                       ("h200", "bf16", "pytorch", "--device cuda --dtype bf16"),
                       ("h200", "fp16", "pytorch", "--device cuda --dtype fp16"),
                       ("h200", "bf16", "pytorch-sdpa", "--device cuda --dtype bf16 --attn sdpa"),
                       ("h200", "bf16", "pytorch-b16", "--device cuda --dtype bf16 --batch 16")]
            for hw, prec, fw, flags in tc:
                prec = "f32" if prec == "fp32" else prec
                add(f"{fw}-{hw}-{prec}@{m}", url, dims(hw, prec, fw), f"{ts} {flags}")

    suites = []
    for name, n in (("math", a.math), ("code", a.code), ("safety", a.safety), ("chat", a.chat), ("long", a.long)):
        if n > 0:
            suites.append(f"builtin:{name}?n={n}")
    spec = {
        "name": "real stacks: the embedded engine, llama.cpp and PyTorch on the same GGUF files",
        "suites": suites,
        "decoding": {"temperature": 0, "top_p": 1, "seed": 42, "max_tokens": a.max_tokens},
        "baseline": "ref@{model}",
        "configs": configs,
    }
    json.dump(spec, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
