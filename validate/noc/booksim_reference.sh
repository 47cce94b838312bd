#!/usr/bin/env bash
# Builds BookSim2 at a pinned commit outside the tpsim tree and writes the reference
# figures tests/sim/noc_booksim_test.cc compares tpsim's TLM network with:
#   validate/results/noc/booksim2-{mesh4x4,mesh8x8,torus8x8}.csv
# (configurations: validate/noc/booksim/*.cfg; loads and patterns: booksim_reference.py;
# one line of BookSim2 is changed so that torus ties are routed as tpsim routes them).
#
# Usage: validate/noc/booksim_reference.sh [--jobs N] [--only mesh4x4|mesh8x8|torus8x8]
# Environment:
#   BOOKSIM2_GIT   where to clone from (default https://github.com/booksim/booksim2)
#   WORK           build folder (default /tmp/tpsim-booksim2); BookSim2's code never
#                  enters the tpsim tree
# Needs git, g++, make, bison, flex and python3 (Debian: apt-get install bison flex).
# Not run in CI: it needs the network to fetch BookSim2.
set -euo pipefail

COMMIT=28f43299f1706a3160ffac721ca461d74eb6e618  # master, 2017-06-27
REPO=${BOOKSIM2_GIT:-https://github.com/booksim/booksim2}
WORK=${WORK:-/tmp/tpsim-booksim2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

mkdir -p "$WORK"
[[ -d "$WORK/booksim2/.git" ]] || git clone -q "$REPO" "$WORK/booksim2"
git -C "$WORK/booksim2" checkout -q -f "$COMMIT"
# The one change: BookSim2's dimension-order torus routing sends a packet whose distance
# in a dimension is exactly k/2 either way at random; tpsim's torus routes go the
# positive way (arch/topology/torus.cc), so the script makes BookSim2 do the same.
# (Random ties spread such traffic over both directions: on an 8x8 torus under uniform
# traffic the busiest channel carries 1.0 x the per-node rate with random ties against
# 1.25 x with positive ties.)
sed -i 's/( ( dist2 == 0 ) \&\& ( RandomInt( 1 ) ) ) ) {$/( dist2 == 0 ) ) {  \/\/ tpsim: ties go the positive way/' \
  "$WORK/booksim2/src/routefunc.cpp"
[[ $(git -C "$WORK/booksim2" diff --numstat | awk '{print $1 + $2}') == 2 ]] ||
  { echo "booksim2: the tie patch did not apply as expected" >&2; exit 1; }
make -C "$WORK/booksim2/src" -j"$(nproc)" >"$WORK/make.log" 2>&1 || { tail -20 "$WORK/make.log"; exit 1; }
got=$(git -C "$WORK/booksim2" rev-parse HEAD)
[[ "$got" == "$COMMIT" ]] || { echo "booksim2 checkout is at $got, expected $COMMIT" >&2; exit 1; }
python3 "$ROOT/validate/noc/booksim_reference.py" "$WORK/booksim2/src/booksim" "$COMMIT" \
  "$ROOT/validate/results/noc" "$@"
