#!/usr/bin/env bash
# Builds, here, a self-contained bundle of the GPU harness under validate/bundle/ (git-ignored)
# for a GPU machine that has only the NVIDIA driver, CUDA runtime, cuBLAS and NCCL and no network:
#   bin/tpsim-validate(.real)  the harness and an LD_LIBRARY_PATH wrapper
#   bin/tpsim(.real)           the simulator (for `tpsim compare --plot`), when built
#   lib/                       the non-CUDA shared libraries they need (from ldd; not libcuda,
#                              libcudart, libcublas(Lt), libnccl, nor glibc's own)
#   configs/, validate/        the configs and experiments they read, run-on-gpu.sh, plot_compare.py,
#                              plot_gpu.py
# Fails when the bundle is 64 MiB or more; prints its size.
# usage: validate/bundle.sh [BUILD_DIR]   (default: build/, configured with TPSIM_CUDA=AUTO|ON)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
out=$here/bundle
[ -d "$build" ] || cmake -S "$root" -B "$build" -DTPSIM_CUDA=ON -DTPSIM_BUILD_TESTS=OFF
cmake --build "$build" --target tpsim-validate -j2
cmake --build "$build" --target tpsim -j2 || echo "bundle.sh: tpsim not built; compare plots will be skipped"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/validate/experiments"
skip='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libc|libm|libdl|libpthread|librt|ld-linux[^ ]*|linux-vdso|libresolv)\.so'
for exe in tpsim-validate tpsim; do
  [ -x "$build/bin/$exe" ] || continue
  cp "$build/bin/$exe" "$out/bin/$exe.real"
  strip --strip-debug "$out/bin/$exe.real" 2>/dev/null || true
  ldd "$build/bin/$exe" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    if [[ "$name" =~ $skip ]]; then continue; fi
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done
  cat > "$out/bin/$exe" <<WRAP
#!/usr/bin/env bash
d=\$(cd "\$(dirname "\$0")/.." && pwd)
export LD_LIBRARY_PATH="\$d/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export TPSIM_CONFIG_DIR="\${TPSIM_CONFIG_DIR:-\$d/configs}"
export TPSIM_PLOT_SCRIPT="\${TPSIM_PLOT_SCRIPT:-\$d/validate/plot_compare.py}"
exec "\$d/bin/$exe.real" "\$@"
WRAP
  chmod +x "$out/bin/$exe"
done
strip --strip-debug "$out"/lib/*.so* 2>/dev/null || true
mkdir -p "$out/configs"
cp -r "$root/configs/chips" "$root/configs/models" "$root/configs/experiments" "$out/configs/"
cp "$here"/experiments/*.textproto "$out/validate/experiments/"
cp "$here/run-on-gpu.sh" "$here/plot_compare.py" "$here/plot_gpu.py" "$out/validate/"
bytes=$(du -sb "$out" | cut -f1)
echo "bundle: $out, $bytes bytes ($((bytes / 1048576)) MiB)"
if [ "$bytes" -ge $((64 * 1048576)) ]; then
  echo "bundle.sh: bundle is over 64 MiB" >&2
  exit 1
fi
