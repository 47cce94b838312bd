#!/usr/bin/env bash
# The fixed set of GPU checks, run from an unpacked bundle (validate/bundle.sh) on one machine
# with an H200 (or H100) node (estimated at about 5 minutes before the numerics check was added;
# never timed). Writes into validate/results/ next to
# this script (or $1):
#   <model>-tp<N>.measured.json / .predicted.json / .txt   one layer at TP = 1, 2, 4, 8 as GPUs allow
#   <model>-tp<N>.compare.txt / .png                         tpsim compare (--plot when python3 +
#                                                            matplotlib are there, else skipped)
#   collectives.json / .txt                                   the NCCL sweep, 8 KiB .. 1 GiB
#   summary.txt                                               what ran and what did not
# With fewer GPUs than ranks, every rank's compute runs on the GPUs there are and collectives
# are reported as unmeasured (the .txt files say so). Each tpsim-validate run first checks the
# numerics of the partitioned layer against TP 1 on one GPU (its .txt says what and how close);
# a mismatch is exit 1 and shows in summary.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
res=${1:-$here/results}
mkdir -p "$res"
V=$top/bin/tpsim-validate
T=$top/bin/tpsim
reps=${TPSIM_VALIDATE_REPS:-10}
warm=${TPSIM_VALIDATE_WARMUP:-3}
summary=$res/summary.txt
: > "$summary"
log() { echo "$*" | tee -a "$summary"; }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
log "# run-on-gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), $gpus GPU(s):"
nvidia-smi -L 2>/dev/null | tee -a "$summary" || true
for model in qwen3-4b llama-3.1-8b; do
  exp=$here/experiments/$model-h200.textproto
  for tp in 1 2 4 8; do
    name=$model-tp$tp
    note=""
    [ "$tp" -gt "$gpus" ] && note=" (only $gpus GPU(s): ranks run one after another, collectives unmeasured)"
    log "== $name$note"
    timeout 240 "$V" "$exp" --set mapping.tp=$tp --reps "$reps" --warmup "$warm" \
      --out "$res/$name.measured.json" --predicted "$res/$name.predicted.json" > "$res/$name.txt" 2>&1
    rc=$?
    log "   tpsim-validate exit $rc"
    grep -E "^#   (partitioned|TP 1)" "$res/$name.txt" | sed 's/^#/  /' | tee -a "$summary"
    [ $rc -eq 0 ] || { tail -5 "$res/$name.txt" | tee -a "$summary"; continue; }
    if [ -x "$T" ]; then
      plot=(--plot "$res/$name.png")
      if ! "$T" compare --help >/dev/null 2>&1; then plot=(); fi
      "$T" compare "$res/$name.predicted.json" "$res/$name.measured.json" "${plot[@]}" > "$res/$name.compare.txt" 2>&1 ||
        "$T" compare "$res/$name.predicted.json" "$res/$name.measured.json" > "$res/$name.compare.txt" 2>&1 ||
        log "   compare failed"
      grep -E "^(MAPE|worst op)" "$res/$name.compare.txt" | sed 's/^/   /' | tee -a "$summary"
      [ -f "$res/$name.png" ] || log "   no plot (python3 with matplotlib missing?)"
    else
      log "   tpsim not in the bundle: compare skipped"
    fi
  done
done
log "== collectives"
timeout 150 "$V" --collectives --reps "$reps" --warmup "$warm" --out "$res/collectives.json" \
  > "$res/collectives.txt" 2>&1
log "   tpsim-validate --collectives exit $?"
log "done; results in $res"
