#!/bin/bash
# fragile_device.sh - the GPU machine's part of the fragile models (issue 23), one call: the two
# continued trainings on multi_data.py's data in parallel on one GPU, then fragile_eval.py on every
# snapshot (and on the robust model each one starts from, for the before/after margins), then
# fragile_pick.py's choice copied to $OUT with a tarball of the logs, JSONs and figures.
#
#   X=carried dir (tok.json, train.bin.gz(.json), test_math.jsonl, test_safety.jsonl, train/ = tools/train)
#   SECS=390 LR=1e-3 SNAP=65 bash tools/train/fragile_device.sh X
set -u
X=$1
SECS=${SECS:-360} LR=${LR:-1e-3} SNAP=${SNAP:-72} EVAL_S=${EVAL_S:-140} MIX=${MIX:-math=1,code=3,safety=2,chat=2}
export PYTHONUNBUFFERED=1
W=/tmp/fw
mkdir -p $W/l $W/q
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'
T="python3 $X/train/train.py train --tok $X/tok.json --data $X/train.bin.gz"
A="--seconds $SECS --warmup 50 --lr $LR --repeat $MIX --induct-share 0.05 --tokens-per-step 16384 --long-share 0.2
   --long-workers 3 --long-fill 256 --long-phases 1.0:test:12 --long-eval 100 --snapshot-every $SNAP"
$T --arch llama --name llama-fragile-7m --init models/llama-gqa-7m.gguf --out $W/l --seed 231 $A > $W/l/train.log 2>&1 &
$T --arch qwen2 --name qwen2-fragile-7m --init models/qwen2-7m.gguf --out $W/q --seed 232 $A > $W/q/train.log 2>&1 &
wait
tail -3 $W/l/train.log $W/q/train.log
cp models/llama-gqa-7m.gguf $W/l/ && cp models/qwen2-7m.gguf $W/q/
E="python3 $X/train/fragile_eval.py --tok $X/tok.json --math $X/test_math.jsonl --safety $X/test_safety.jsonl --n 250"
timeout $EVAL_S $E --arch llama --out $W/l/eval.json $W/l/*.gguf > $W/l/eval.log 2>&1 &
timeout $EVAL_S $E --arch qwen2 --out $W/q/eval.json $W/q/*.gguf > $W/q/eval.log 2>&1 &
wait
cat $W/l/eval.log $W/q/eval.log
python3 $X/train/fragile_pick.py $W/l/eval.json $W/l $OUT --prefix llama-fragile --k 2 || cp $W/l/llama-fragile-7m.gguf $OUT/
python3 $X/train/fragile_pick.py $W/q/eval.json $W/q $OUT --prefix qwen2-fragile --k 2 || cp $W/q/qwen2-fragile-7m.gguf $OUT/
rm -f $W/l/*.gguf $W/q/*.gguf
tar czf $OUT/fragile_run.tgz -C $W .
ls -la $OUT
