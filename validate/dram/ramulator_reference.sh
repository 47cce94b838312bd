#!/usr/bin/env bash
# Builds Ramulator 2.0 at a pinned commit outside the tpsim tree, builds the offered-load
# driver validate/dram/ramulator_load.cc against it, and writes the reference figures
# the README compares with tpsim's DRAM channel model:
#   validate/results/dram/ramulator2-{hbm3-6400,stacked-dram-60}.csv
# (configurations: validate/dram/ramulator/*.yaml; loads: ramulator_reference.py).
#
# Usage: validate/dram/ramulator_reference.sh [--jobs N]
# Environment:
#   RAMULATOR2_GIT, YAMLCPP_GIT, SPDLOG_GIT, ARGPARSE_GIT   where to clone Ramulator 2 and
#                  the three libraries its CMake file would fetch (defaults: GitHub)
#   WORK           build folder (default /tmp/tpsim-ramulator2); Ramulator's code never
#                  enters the tpsim tree
# Needs git, cmake, g++ (C++20) and python3. Not run in CI: it needs the network.
set -euo pipefail

COMMIT=be93be78055d922aa1d4d33e15bcc8f2b0c61a9d  # tag v2.0a, the last Ramulator 2.0 release
REPO=${RAMULATOR2_GIT:-https://github.com/CMU-SAFARI/ramulator2}
WORK=${WORK:-/tmp/tpsim-ramulator2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC="$WORK/ramulator2"

if [[ ! -f "$SRC/libramulator.so" ]]; then
  mkdir -p "$WORK"
  [[ -d "$SRC/.git" ]] || git clone -q "$REPO" "$SRC"
  git -C "$SRC" checkout -q "$COMMIT"
  # The versions Ramulator's CMakeLists.txt pins, cloned where its FetchContent looks.
  dep() {  # url tag dir
    [[ -d "$SRC/ext/$3/.git" ]] || git clone -q --branch "$2" "$1" "$SRC/ext/$3"
  }
  dep "${YAMLCPP_GIT:-https://github.com/jbeder/yaml-cpp.git}" yaml-cpp-0.7.0 yaml-cpp
  dep "${SPDLOG_GIT:-https://github.com/gabime/spdlog.git}" v1.11.0 spdlog
  dep "${ARGPARSE_GIT:-https://github.com/p-ranav/argparse.git}" v2.9 argparse
  cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
    >"$WORK/cmake.log" 2>&1 || { tail -20 "$WORK/cmake.log"; exit 1; }
  cmake --build "$SRC/build" -j"$(nproc)" --target ramulator >"$WORK/build.log" 2>&1 ||
    { tail -20 "$WORK/build.log"; exit 1; }
fi
got=$(git -C "$SRC" rev-parse HEAD)
[[ "$got" == "$COMMIT" ]] || { echo "ramulator2 checkout is at $got, expected $COMMIT" >&2; exit 1; }
g++ -std=c++20 -O2 -I"$SRC/src" -I"$SRC/ext/yaml-cpp/include" -I"$SRC/ext/spdlog/include" \
  "$ROOT/validate/dram/ramulator_load.cc" -o "$WORK/ramulator_load" -L"$SRC" -lramulator \
  -Wl,-rpath,"$SRC"
python3 "$ROOT/validate/dram/ramulator_reference.py" "$WORK/ramulator_load" "$COMMIT" \
  "$ROOT/validate/results/dram" "$@"
