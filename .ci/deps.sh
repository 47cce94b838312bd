#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test tpsim (as root).
# Idempotent: installs only missing packages, and runs apt-get update only then.
# --tests adds what only the test suite needs (a single-node Slurm cluster).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libsystemc-dev libboost-graph-dev libprotobuf-dev protobuf-compiler
  libspdlog-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  python3 python3-matplotlib python3-numpy time
  clang-14 libclang-rt-14-dev
)
if [[ "${1:-}" == "--tests" ]]; then
  PACKAGES+=(slurm-wlm munge)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tpsim: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
