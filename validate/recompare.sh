#!/bin/bash
# Prints again the committed `tpsim compare` outputs of the GPU runs under validate/results/ from
# their committed JSON and CSV files, as validate/results/README.md says they are. In each run's
# folder (so the files are named as they lie there):
#   NAME.compare.txt           tpsim compare NAME.predicted.json NAME.measured.json
#   NAME.compare-program.txt   tpsim compare NAME.predicted-program.json NAME.measured.json
#   STEM.compare.txt           tpsim compare --chip CHIP STEM.csv   (gemms*.csv, collectives.csv)
# without --plot (the pictures are left as they are). CHIP is $TPSIM_GPU_CHIP, default
# h200-sxm-8 (run-on-gpu.sh's default). The outputs move when a model or compare's format does:
# the GEMM model (arch/gpu/gemm.cc) moves gemms*.compare.txt, a new line in compare's report
# moves all of them.
#
# Usage: validate/recompare.sh TPSIM [--check] [FILE...]
#   FILE...   the outputs to print again (default: every *.compare.txt and *.compare-program.txt
#             under validate/results/)
#   --check   write nothing: name each output that differs from what TPSIM prints now, and exit 1
#             when one does (0 when all agree)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: validate/recompare.sh TPSIM [--check] [FILE...]" >&2; exit 2; }
t=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
[ -x "$t" ] || { echo "recompare: $t is not an executable tpsim" >&2; exit 2; }
check=0
files=()
for a in "$@"; do
  if [ "$a" = --check ]; then check=1; else files+=("$(realpath -- "$a")"); fi
done
if [ ${#files[@]} -eq 0 ]; then
  while IFS= read -r f; do files+=("$f"); done < <(find "$root/validate/results" \
    \( -name '*.compare.txt' -o -name '*.compare-program.txt' \) | LC_ALL=C sort)
fi
chip=${TPSIM_GPU_CHIP:-h200-sxm-8}
differ=0
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  base=$(basename "$f")
  case "$base" in
    *.compare-program.txt) args=("${base%.compare-program.txt}.predicted-program.json" "${base%.compare-program.txt}.measured.json") ;;
    *.compare.txt)
      stem=${base%.compare.txt}
      if [ -f "$dir/$stem.csv" ]; then
        args=(--chip "$chip" "$stem.csv")
      else
        args=("$stem.predicted.json" "$stem.measured.json")
      fi
      ;;
    *) echo "recompare: $f: not a .compare.txt or .compare-program.txt" >&2; exit 2 ;;
  esac
  now=$(cd "$dir" && "$t" compare "${args[@]}" 2>&1)
  rc=$?
  # Nothing compared exits 2 after the report (a one-GPU run's collective sweep measured nothing):
  # its output, the reason included, is what the file holds.
  if [ $rc -eq 2 ] && grep -q -e ': no row compared' -e ': no op was compared' <<<"$now"; then rc=0; fi
  if [ $rc -ne 0 ]; then
    echo "recompare: ${f#$root/}: tpsim compare ${args[*]} exited $rc: $now" >&2
    exit 1
  fi
  if [ "$now" != "$(cat "$f")" ]; then
    differ=1
    if [ $check -eq 1 ]; then
      echo "differs: ${f#$root/} (tpsim compare ${args[*]})"
    else
      printf '%s\n' "$now" > "$f"
      echo "printed again: ${f#$root/}"
    fi
  fi
done
[ $check -eq 1 ] && [ $differ -eq 1 ] && exit 1
exit 0
