# The fourth H200 run: the three layers at TP 1 with the block-per-row kernels, then longer prompts.
mkdir -p /tmp/r4
E=validate/experiments
one() {
  n=$1; shift
  timeout 60 bin/tpsim-validate "$@" --reps 10 --warmup 3 --out /tmp/r4/$n.measured.json \
    --predicted /tmp/r4/$n.predicted.json > /tmp/r4/$n.txt 2>&1
  echo "$n exit $?"
  grep -E "^(rmsnorm|softmax) \(" /tmp/r4/$n.txt
  bin/tpsim compare /tmp/r4/$n.predicted.json /tmp/r4/$n.measured.json --plot /tmp/r4/$n.png > /tmp/r4/$n.compare.txt 2>&1
  grep -E "^(MAPE|total)" /tmp/r4/$n.compare.txt
}
one qwen3-4b-tp1 $E/qwen3-4b-h200.textproto --set mapping.tp=1
one llama-3.1-8b-tp1 $E/llama-3.1-8b-h200.textproto --set mapping.tp=1
one qwen3-30b-a3b-tp1 $E/qwen3-30b-a3b-h200.textproto --set mapping.tp=1 --set mapping.moe.ep=1
for L in 4096 2048; do
  one qwen3-4b-tp1-prompt$L $E/qwen3-4b-h200.textproto --set mapping.tp=1 --set workload.seq_len=$L --no-numerics
  one llama-3.1-8b-tp1-prompt$L $E/llama-3.1-8b-h200.textproto --set mapping.tp=1 --set workload.seq_len=$L --no-numerics
done
one qwen3-30b-a3b-tp1-prompt2048 $E/qwen3-30b-a3b-h200.textproto --set mapping.tp=1 --set mapping.moe.ep=1 \
  --set workload.seq_len=2048 --no-numerics
