#!/bin/bash
# Long generations (issue 18): `tpsim run` of the reference experiment
# (configs/experiments/reference-qwen3-4b.textproto: Qwen3-4B, 16 stages x TP 4 on wafer-8x8,
# 256-token prompt) with 20, 2000 and 32768 decode steps, on both engines; "before" lowers
# every decode step (--no-reuse), "after" is the default (decode steps reused where exact,
# sim/step_reuse.h; on the TLM engine made from one lowered step as the engine reaches them,
# sim/step_streamed.h). Prints the median wall time and peak RSS (/usr/bin/time -v) of RUNS
# runs each (default 3), and the run's total. Asserts nothing. Targets: 32768 steps in at most
# 2 s and 150 MB (analytical), 30 s (TLM).
# The reference's steps are periodic up to step 320, then timed step by step (sim/step_rolling.h;
# at 32768 steps its KV cache is read from DRAM). The last section is the reference chip and
# shape with a small model whose weights and KV cache stay in SRAM.
# Cases estimated to take longer than LIMIT_S seconds (default 120) are skipped and say so
# (the unrolled 32768-step runs: minutes and GBs).
# With MOE=1 in the environment, also the shipped MoE experiments' long generations (no target;
# README "Status": moe-qwen3-235b-a22b is the slow case left), 1000 decode steps each and 200 of
# moe-qwen3-235b-a22b, the default (reused) way only; MOE=only runs that section alone.
# Usage: longgen_bench.sh [TPSIM] [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
runs=${2:-3}
limit=${LIMIT_S:-120}
exp="$here/configs/experiments/reference-qwen3-4b.textproto"
[ -x /usr/bin/time ] || { echo "longgen_bench: needs /usr/bin/time (GNU time)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# case ENGINE STEPS MODE [--set ...]: prints one line.
case_line() {
  local engine=$1 steps=$2 mode=$3 flag=() extra=("${@:4}")
  [ "$mode" = before ] && flag=(--no-reuse)
  local walls=() rss=() total=""
  for ((i = 0; i < runs; i++)); do
    if ! timeout "$limit" /usr/bin/time -v -o "$tmp/time" "$tpsim" run "$exp" --engine "$engine" \
        --set workload.decode_steps="$steps" --quiet "${flag[@]}" "${extra[@]}" >"$tmp/out" 2>"$tmp/err"; then
      printf '%-10s %6s %-6s  did not finish in %s s (or failed: %s)\n' "$engine" "$steps" "$mode" "$limit" \
        "$(grep -v '^\s' "$tmp/err" | head -1)"
      return
    fi
    walls+=("$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time" |
      awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')")
    rss+=("$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time")")
    total=$(sed -n 's/^total \([0-9.]*\) us.*/\1/p' "$tmp/out")
  done
  local mw mr
  mw=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  mr=$(printf '%s\n' "${rss[@]}" | sort -g | awk '{ a[NR] = $1 } END { printf "%.0f", a[int((NR + 1) / 2)] / 1024 }')
  local note=""
  grep -q "every decode step lowered" "$tmp/err" && note="  (unrolled: $(sed -n 's/.*every decode step lowered: //p' "$tmp/err" | cut -c1-60)...)"
  printf '%-10s %6s %-6s  wall %7s s  peak RSS %6s MB  total %s us%s\n' "$engine" "$steps" "$mode" "$mw" "$mr" "$total" "$note"
}

reference_cases() {
  echo "reference-qwen3-4b, median of $runs runs (wall, peak RSS from /usr/bin/time -v)"
  for engine in analytical tlm; do
    for steps in 20 2000 32768; do
      for mode in before after; do
        # Unrolled 32768 steps: minutes and GBs (README "Long generations"); skipped.
        if [ "$steps" = 32768 ] && [ "$mode" = before ]; then
          printf '%-10s %6s %-6s  skipped: lowers 32768 steps (minutes, GBs)\n' "$engine" "$steps" "$mode"
          continue
        fi
        case_line "$engine" "$steps" "$mode"
      done
    done
  done
  # A memory plan that changes mid-run: with 8 MiB of SRAM per core attention spills from decode
  # step 15,628 on (context 15,884); before it, the steps lack those spill tasks (a template on
  # each side, README "Long generations"). With a 15,600-token cached prefix the change comes at
  # decode step 28, so 2000 steps can be compared with the unrolled Program.
  sram8=(--set chip.core.sram_bytes=8388608)
  echo "reference-qwen3-4b ${sram8[*]} (the plan changes at decode step 15628)"
  printf '%-10s %6s %-6s  skipped: lowers 32768 steps (minutes, GBs)\n' analytical 32768 before
  case_line analytical 32768 after "${sram8[@]}"
  echo "reference-qwen3-4b ${sram8[*]} --set workload.cached_prefix=15600 (the plan changes at decode step 28)"
  for mode in before after; do case_line analytical 2000 "$mode" "${sram8[@]}" --set workload.cached_prefix=15600; done
  # Where reuse applies on this experiment: TP 1 (no collectives sharing links), 64 steps
  # (attention starts to decide the step time at step 65).
  echo "reference-qwen3-4b --set mapping.tp=1"
  for mode in before after; do case_line analytical 64 "$mode" --set mapping.tp=1; done
  # Reference-like where reuse applies at 32768 steps: the reference chip, prompt and 16 stages,
  # at TP 1 with a small model (hidden 256, 4 heads, one KV head of 64, MLP 512) whose weights
  # and KV cache of 33,024 tokens stay in SRAM (steps do not overlap; each is timed alone).
  # The chip's energy model is on (reused steps carry their energy, sim/step_energy.h).
  small=(--model qwen3-0.6b --set mapping.tp=1 --set mapping.weights=sram --set model.hidden_size=256
    --set model.intermediate_size=512 --set model.num_attention_heads=4 --set model.num_key_value_heads=1
    --set model.head_dim=64)
  echo "reference-qwen3-4b, small model (${small[*]})"
  for steps in 2000 32768; do
    for mode in before after; do
      if [ "$steps" = 32768 ] && [ "$mode" = before ]; then
        printf '%-10s %6s %-6s  skipped: lowers 32768 steps (4.45e+07 tasks, 11.5 GB estimated)\n' analytical "$steps" "$mode"
        continue
      fi
      case_line analytical "$steps" "$mode" "${small[@]}"
    done
  done
}

# The shipped MoE experiments, timed step by step (README "Status", long generations).
moe_cases() {
  echo "shipped MoE experiments, median of $runs runs (wall, peak RSS from /usr/bin/time -v)"
  local e
  for e in moe-mixtral-8x7b moe-qwen3-30b-a3b moe-qwen3-235b-a22b; do
    exp="$here/configs/experiments/$e.textproto"
    echo "$e"
    [ "$e" = moe-qwen3-235b-a22b ] && case_line analytical 200 after
    case_line analytical 1000 after
  done
}

[ "${MOE:-0}" = only ] || reference_cases
if [ "${MOE:-0}" = 1 ] || [ "${MOE:-0}" = only ]; then moe_cases; fi
