#!/usr/bin/env bash
# The fixed set of GPU checks, run from an unpacked bundle (validate/bundle.sh) on one machine
# with an H200 (or H100) node (estimated at about 5 minutes before the numerics check was added;
# never timed). Writes into validate/results/ next to
# this script (or $1):
#   <model>-tp<N>.measured.json / .predicted.json / .txt   one layer at TP = 1, 2, 4, 8 as GPUs allow
#   <model>-tp<N>.compare.txt / .png                         tpsim compare (--plot when python3 +
#                                                            matplotlib are there, else skipped)
#   collectives.json / .txt                                   the NCCL sweep, 8 KiB .. 1 GiB, over
#                                                             2, 4 and 8 GPUs (as many as there are)
#   collectives.csv, .compare.txt, .png                       the same sweep in `tpsim collectives`
#                                                             CSV columns, and tpsim compare --chip on it
#   gemms.csv / .txt, .compare.txt, .png                      cuBLAS bf16 GEMMs, m = 1..8192 on LLM
#                                                             projection shapes, and tpsim compare --chip
#   summary.txt                                               what ran and what did not
# The chip the CSVs are compared against is $TPSIM_GPU_CHIP (default: h200-sxm-8, or h100-sxm-8
# when nvidia-smi names an H100). Keep such results apart from validate/results/public/: the
# models are fitted to H100 files there only, and an H200 or B200 run checks them, it does not
# refit them.
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
chip=${TPSIM_GPU_CHIP:-}
if [ -z "$chip" ]; then
  chip=h200-sxm-8
  nvidia-smi -L 2>/dev/null | grep -q "H100" && chip=h100-sxm-8
fi
compare_csv() {  # FILE STEM: tpsim compare --chip on a measured CSV, with a plot when it can
  if [ -x "$T" ] && [ -s "$1" ]; then
    "$T" compare --chip "$chip" "$1" --plot "$res/$2.png" > "$res/$2.compare.txt" 2>&1 ||
      "$T" compare --chip "$chip" "$1" > "$res/$2.compare.txt" 2>&1 || log "   compare $2 failed"
    grep -E "MAPE" "$res/$2.compare.txt" | grep -v "^ " | sed 's/^/   /' | tee -a "$summary"
  fi
}
log "== collectives (compared against $chip)"
timeout 300 "$V" --collectives --reps "$reps" --warmup "$warm" --out "$res/collectives.json" \
  --csv "$res/collectives.csv" > "$res/collectives.txt" 2>&1
log "   tpsim-validate --collectives exit $?"
compare_csv "$res/collectives.csv" collectives
log "== gemms (compared against $chip)"
timeout 300 "$V" --gemms --reps "$reps" --warmup "$warm" --csv "$res/gemms.csv" > "$res/gemms.txt" 2>&1
log "   tpsim-validate --gemms exit $?"
compare_csv "$res/gemms.csv" gemms
log "done; results in $res"
