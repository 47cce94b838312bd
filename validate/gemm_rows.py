#!/usr/bin/env python3
"""Per-row errors of the GPU GEMM model against the public H100 GEMM files.

usage: validate/gemm_rows.py [--tpsim build/bin/tpsim] [--chip h100-sxm-8] [FILE.csv ...]

For vidur-h100-gemm.csv (cuBLAS fp16), xla-h100-bf16-matmul.csv (XLA bf16) and
aiconfigurator-h100-bf16-gemm.csv (cuBLAS bf16 under CUDA graphs) under validate/results/public/,
times every row's (m, n, k, dtype) with `tpsim gemm CHIP --shapes` and prints the file MAPE,
the three largest errors each way, how many rows are off by more than 25 % and their m range,
the mean error of the rows the model calls latency-, memory- and compute-bound (latency-bound:
count, mean, lowest and highest), the MAPE of the rows whose weight (n x k x 2 bytes) is 10 MB or
more, and the 4096^3 row. Given FILEs (GEMM CSVs in `tpsim gemm --csv` columns, such as
tpsim-validate --gemms writes), it prints the same for them instead, against --chip. Error = (predicted - measured) / measured. The README's GEMM
fidelity paragraph quotes it; `tpsim compare` gives the same file MAPEs per table."""
import argparse
import csv
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    rows = list(csv.reader(line for line in open(path) if not line.startswith("#")))
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def predict(tpsim, chip, rows):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("m,n,k,dtype\n")
        for r in rows:
            f.write("%s,%s,%s,%s\n" % (r["m"], r["n"], r["k"], r["dtype"]))
    try:
        out = subprocess.run([tpsim, "gemm", chip, "--shapes", f.name], capture_output=True, text=True,
                             check=True).stdout
    finally:
        os.unlink(f.name)
    got = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    return [(float(p[4]), p[6]) for p in got]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpsim", default=os.path.join(ROOT, "build", "bin", "tpsim"))
    ap.add_argument("--chip", default="h100-sxm-8")
    ap.add_argument("files", nargs="*", help="GEMM CSVs (default: the three public H100 files)")
    a = ap.parse_args()
    public = ("vidur-h100-gemm.csv", "xla-h100-bf16-matmul.csv", "aiconfigurator-h100-bf16-gemm.csv")
    for path in a.files or [os.path.join(ROOT, "validate", "results", "public", n) for n in public]:
        name = os.path.basename(path) if not a.files else path
        rows = load(path)
        errs = sorted(((p - float(r["time_us"])) / float(r["time_us"]) * 100, int(r["m"]), int(r["n"]),
                       int(r["k"]), bound) for r, (p, bound) in zip(rows, predict(a.tpsim, a.chip, rows)))
        fmt = lambda e: "%+.1f %% at (%d, %d, %d) %s" % e
        print("== %s: %d rows, MAPE %.2f %%" % (name, len(errs), statistics.mean(abs(e[0]) for e in errs)))
        print("  lowest:  " + "; ".join(fmt(e) for e in errs[:3]))
        print("  highest: " + "; ".join(fmt(e) for e in errs[-3:]))
        big = [e for e in errs if abs(e[0]) > 25]
        if big:
            print("  %d rows off by more than 25 %%, m = %d..%d" % (len(big), min(e[1] for e in big),
                                                                  max(e[1] for e in big)))
        lat = [e[0] for e in errs if e[4] == "latency"]
        if lat:
            print("  latency-bound: %d rows, mean %+.1f %%, lowest %+.1f %%, highest %+.1f %%" %
                  (len(lat), statistics.mean(lat), min(lat), max(lat)))
        for bound in ("memory", "compute"):
            b = [e[0] for e in errs if e[4] == bound]
            if b:
                print("  %s-bound: %d rows, mean %+.1f %%, MAPE %.2f %%" % (bound, len(b), statistics.mean(b),
                                                                       statistics.mean(abs(x) for x in b)))
        big = [abs(e[0]) for e in errs if 2 * e[2] * e[3] >= 10_000_000]
        if big and len(big) < len(errs):
            print("  weights >= 10 MB: %d rows, MAPE %.2f %%" % (len(big), statistics.mean(big)))
        for e in errs:
            if e[1:4] == (4096, 4096, 4096):
                print("  4096^3: " + fmt(e))


if __name__ == "__main__":
    main()
