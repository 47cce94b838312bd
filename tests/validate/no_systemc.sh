#!/bin/bash
# tpsim-validate links the analytical engine and the run pipeline but not SystemC: neither a
# NEEDED entry for libsystemc nor any sc_core symbol. tpsim, which links the TLM engine, is the
# control: the same checks must find SystemC there.
# Usage: no_systemc.sh TPSIM_VALIDATE TPSIM
set -euo pipefail
validate=$1 tpsim=$2
has_systemc() {  # whole outputs through grep -c: no early exit, no SIGPIPE under pipefail
  local needed symbols
  needed=$(readelf -d "$1" | grep -c 'NEEDED.*libsystemc' || true)
  symbols=$(nm -C "$1" | grep -c ' sc_core::' || true)
  [ "$needed" -gt 0 ] || [ "$symbols" -gt 0 ]
}
has_systemc "$tpsim" || { echo "FAIL: the check finds no SystemC in $tpsim either"; exit 1; }
if has_systemc "$validate"; then
  echo "FAIL: $validate links SystemC:"
  readelf -d "$validate" | grep 'NEEDED.*libsystemc' || true
  nm -C "$validate" | grep ' sc_core::' | head -5 || true
  exit 1
fi
echo "ok: $(basename "$tpsim") links SystemC, $(basename "$validate") does not"
