#!/bin/bash
# safety36_device.sh - the GPU machine's part of issue 36, one call: the guard continued on guard data with
# a real decision boundary (guard_data.py: dual-use requests, partial compliance), and the two fragile
# models continued on multi_data.py's data with dual-use requests (refused, helped with limits stated, or
# helped plainly) and math answers written as chains (--math-chain), all three in parallel; then
# fragile_eval.py on every snapshot and on the starting files (one process a file), fragile_pick.py's
# choice (K per model) with the logits fixture of each pick (soup.py S S 0: PyTorch float64 on the CPU),
# and a tarball of logs, JSONs and figures, to $OUT.
#
#   X=carried dir (tok.json, train.bin.gz(.json), guard.bin.gz(.json), test_{math,safety,code,long}.jsonl,
#     train/ = tools/train);  SECS=220 LR=1e-3 SNAP=55 GSECS=150 EVAL_S=200 bash X/train/safety36_device.sh X
set -u
X=$1
SECS=${SECS:-220} LR=${LR:-1e-3} SNAP=${SNAP:-55} GSECS=${GSECS:-150} EVAL_S=${EVAL_S:-240} K=${K:-1}
# the eval's sizes: 12 evals at once on one GPU (greedy, no KV cache) at 150/520/80/20 prompts did not
# finish in 140 s (session 20: every eval killed, nothing picked); these are the sizes now
EN=${EN:-60} ENS=${ENS:-120} ENC=${ENC:-40} ENL=${ENL:-4}
MIX=${MIX:-math=1,code=3,safety=2,chat=2}
export PYTHONUNBUFFERED=1
W=/tmp/w36
mkdir -p $W/l $W/q $W/g
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'
T="python3 $X/train/train.py train --tok $X/tok.json"
A="--data $X/train.bin.gz --seconds $SECS --warmup 50 --lr $LR --repeat $MIX --induct-share 0.05 --tokens-per-step 16384
   --long-share 0.2 --long-workers 3 --long-fill 256 --long-phases 1.0:test:12 --long-eval 50 --snapshot-every $SNAP"
$T --arch llama --name llama-fragile-7m --init models/llama-fragile-7m.gguf --out $W/l --seed 361 $A > $W/l/train.log 2>&1 &
$T --arch qwen2 --name qwen2-fragile-7m --init models/qwen2-fragile-7m.gguf --out $W/q --seed 362 $A > $W/q/train.log 2>&1 &
$T --arch guard --name guard-llama-1m --init models/guard/guard-llama-1m.gguf --data $X/guard.bin.gz --seconds $GSECS \
   --warmup 50 --lr 1e-3 --tokens-per-step 32768 --seed 363 --out $W/g > $W/g/train.log 2>&1 &
wait
for f in $W/l/train.log $W/q/train.log $W/g/train.log; do tail -n 2 $f | cut -c1-300; done
# the trained files come back whatever the evals do (the guard inside run36.tgz: at most 8 files return)
cp $W/l/llama-fragile-7m.gguf $OUT/llama-fragile-7m.final.gguf; cp $W/q/qwen2-fragile-7m.gguf $OUT/qwen2-fragile-7m.final.gguf
cp models/llama-fragile-7m.gguf $W/l/init.gguf && cp models/qwen2-fragile-7m.gguf $W/q/init.gguf
export OMP_NUM_THREADS=1
E="python3 $X/train/fragile_eval.py --tok $X/tok.json --math $X/test_math.jsonl --safety $X/test_safety.jsonl --n $EN --n-safety $ENS
   --max-new 200 --n-code $ENC --code $X/test_code.jsonl --long $X/test_long.jsonl --n-long $ENL"
for m in l q; do
  arch=llama; [ $m = q ] && arch=qwen2
  for f in $(ls $W/$m/init.gguf; ls -t $W/$m/*.s*.gguf | head -2; ls $W/$m/*-7m.gguf); do  # init, the last two snapshots, the end
    b=$(basename $f .gguf)
    timeout $EVAL_S $E --arch $arch --out $W/$m/eval.$b.json $f > $W/$m/eval.$b.log 2>&1 &
  done
done
wait
for m in l q; do
  python3 -c 'import json,sys; d={}; [d.update(json.load(open(f))) for f in sys.argv[2:]]; json.dump(d, open(sys.argv[1], "w"), indent=1)' \
    $W/$m/eval.json $W/$m/eval.*.json
  grep -h '^[a-z]' $W/$m/eval.*.log | cut -c1-600
done
python3 $X/train/fragile_pick.py $W/l/eval.json $W/l $W/pick --prefix llama-fragile --exclude init.gguf --k $K --dual 0.15
python3 $X/train/fragile_pick.py $W/q/eval.json $W/q $W/pick --prefix qwen2-fragile --exclude init.gguf --k $K --dual 0.15
for f in $W/pick/*.gguf; do
  b=$(basename $f .gguf); n=${b%%.*}; m=l; [ $n = qwen2-fragile-7m ] && m=q
  python3 $X/train/soup.py $f $f 0 $W/$m/$n.json $W/pick/$b.soup.gguf --name $n --tok $X/tok.json \
    --fixture $W/pick/$b.logits.json > $W/pick/$b.soup.log 2>&1
  cmp $f $W/pick/$b.soup.gguf && echo "$b: soup file identical" && rm $W/pick/$b.soup.gguf
  cp $f $OUT/
done

rm -f $W/l/*.gguf $W/q/*.gguf
tar czf $OUT/run36.tgz -C $W --exclude=pick/*.gguf .
ls -la $OUT
