#!/bin/bash
# Decode-step reuse against the unrolled Program on random experiments (issue 18): for each of
# `tpsim agree`'s experiments 0 .. COUNT-1 of SEED (written with --emit), `tpsim run` with
# STEPS decode steps three ways: --no-reuse (every step lowered), --reuse (the ways of
# sim/step_reuse.h, tried in order) and --reuse --step-by-step, each with --out; the JSON of
# each reused run must be byte for byte the unrolled one's (cmp). Prints one line per
# experiment (same, DIFFERS, or why a way lowered every step) and a count; exits 1 when some
# reused run differs. Past 256 steps both sum each op's rows over decode steps 9 on
# (RunOptions::row_steps, README "Long generations"): the same bytes too. Longer runs and more
# experiments than the ctest's (StepReuse.Random*); about a second per experiment at 200 steps.
# ENGINE=tlm in the environment runs the TLM engine instead, two ways: --no-reuse and --reuse
# (its steps made from the template as it reaches them, sim/step_streamed.h; StepStreamed.*).
# Usage: reuse_soak.sh [TPSIM] [COUNT] [STEPS] [SEED] [FAMILY]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=${1:-$here/build/bin/tpsim}
count=${2:-40}
steps=${3:-200}
seed=${4:-11}
family=${5:-dense}
engine=${ENGINE:-analytical}
ways=(reuse step)
[ "$engine" = tlm ] && ways=(reuse)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
same=0 differs=0 lowered=0 failed=0
same() { cmp -s "$1" "$2"; }  # same A B: the two results are the same bytes
for ((i = 0; i < count; i++)); do
  exp="$tmp/e$i.textproto"
  if ! "$tpsim" agree --seed "$seed" --only "$i" --family "$family" --emit "$exp" >/dev/null 2>"$tmp/err"; then
    printf '%3d  could not emit: %s\n' "$i" "$(head -1 "$tmp/err")"
    failed=$((failed + 1))
    continue
  fi
  run() {  # run OUT [flags]: exit status; stderr into $tmp/err.OUT
    local out=$1
    shift
    "$tpsim" run "$exp" --set workload.decode_steps="$steps" --engine "$engine" --quiet --out "$tmp/$out.json" \
      "$@" >/dev/null 2>"$tmp/err.$out"
  }
  if ! run unrolled --no-reuse; then
    printf '%3d  unrolled run failed: %s\n' "$i" "$(head -1 "$tmp/err.unrolled")"
    failed=$((failed + 1))
    continue
  fi
  line=""
  for way in "${ways[@]}"; do
    flags=(--reuse)
    [ "$way" = step ] && flags+=(--step-by-step)
    if ! run "$way" "${flags[@]}"; then
      line+="  $way: failed ($(head -1 "$tmp/err.$way"))"
      failed=$((failed + 1))
    elif grep -q "every decode step lowered" "$tmp/err.$way"; then
      line+="  $way: lowered ($(sed -n 's/.*every decode step lowered: //p' "$tmp/err.$way" | cut -c1-70))"
      lowered=$((lowered + 1))
    elif same "$tmp/unrolled.json" "$tmp/$way.json"; then
      line+="  $way: same"
      same=$((same + 1))
    else
      line+="  $way: DIFFERS"
      differs=$((differs + 1))
    fi
  done
  printf '%3d%s\n' "$i" "$line"
done
engine_note=""
[ "$engine" = tlm ] && engine_note=" tlm engine,"
echo "seed $seed, $family,$engine_note $count experiments x $steps decode steps: $same reused runs the same as unrolled," \
  "$differs differ, $lowered lowered every step, $failed failed"
[ "$differs" = 0 ]
