#!/usr/bin/env python3
"""Refits the GPU-node constants of configs/chips/h100-sxm-8.textproto to the H100 measurements
in validate/results/public/ by grid search, with the models themselves: every candidate is
scored by `tpsim compare --chip h100-sxm-8 --set gpu.FIELD=VALUE ... FILE --summary`.

usage: validate/fit_gpu.py [--tpsim build/bin/tpsim] [--collectives-only] [--gemm-only]

  GEMM:        tensor_efficiency, hbm_efficiency, kernel_overhead_us, operand_flops_per_byte
               minimise the largest of three MAPEs: vidur-h100-gemm.csv (cuBLAS fp16),
               xla-h100-bf16-matmul.csv (XLA bf16) and aiconfigurator-h100-bf16-gemm.csv (cuBLAS
               bf16 in CUDA graphs) over its tables whose weight, n x k x 2 bytes, is 10 MB or more
               (the harness keeps smaller weights in L2 across calls); the sum breaks ties. It
               prints the shipped constants' MAPEs and the five best candidates (--gemm-only: and
               stops there).
  collectives: collective_kernel_us (the device-side fixed cost of one collective kernel)
               minimises the MAPE of nccl-tests-h100-4gpu-graph.csv (CUDA graphs: device time,
               no host issue); then, with it, the ring and host constants (collective_launch_us,
               collective_launch_per_gpu_us, ring_ll128_step_us, ring_simple_step_us,
               ring_efficiency, ring_allreduce_efficiency) minimise the sum of the issue-14 ring
               target tables (4-GPU eager, 8-GPU ring-forced, nccl#1047, 2/4/6-GPU all_reduce)
               plus the CUDA-graph table, with every target above 8 % penalised by 100; then
               nvls_efficiency, nvls_rank_loss, nvls_chunk_rtt_us minimise the sum of the NVLS
               tables (-allreduce-algo.csv, -4gpu-forced.csv, the 6-GPU row of -2-6gpu.csv and
               -8gpu-allreduce-auto.csv, that target penalised above 8 % likewise); then
               ring_channel_memory_gbps minimises the sum of the 2-GPU ring tables (NCCL's
               choice in nccl-tests-h100-allreduce-2-6gpu.csv, ring forced in -algo.csv).
               collective_launch_exponent stays 5 (fitted with the 4-GPU launch alone before the
               8-GPU refit; a grid over it is left out to keep the run short).
Prints the best values found (it does not edit the chip file) and the MAPEs they give. Only
H100 files are used; H200 and B200 keep H100's constants (no refit)."""
import argparse
import itertools
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUB = os.path.join(ROOT, "validate", "results", "public")
AIC_ROWS_PER_TABLE = 72  # aiconfigurator-h100-bf16-gemm.csv: 72 values of m in every (n, k) table


def compare(tpsim, sets, csv):
    args = [tpsim, "compare", "--chip", "h100-sxm-8", "--summary", os.path.join(PUB, csv)]
    for k, v in sets.items():
        args += ["--set", "gpu.%s=%s" % (k, v)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    tables = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(.*): \d+ (?:sizes|rows), MAPE ([0-9.]+) %", out, re.M)}
    file_mape = float(re.search(r"file MAPE: ([0-9.]+) %", out).group(1))
    return file_mape, tables


def search(tpsim, grid, score):
    best = None
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        sets = dict(zip(keys, values))
        s = score(sets)
        if best is None or s < best[0]:
            best = (s, sets)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpsim", default=os.path.join(ROOT, "build", "bin", "tpsim"))
    ap.add_argument("--collectives-only", action="store_true", help="skip the GEMM grid (270 candidates, 810 runs)")
    ap.add_argument("--gemm-only", action="store_true", help="fit the GEMM constants (see above) and stop")
    a = ap.parse_args()
    if not a.collectives_only:
        def aic(sets):
            """aiconfigurator's file MAPE and that of its tables whose weight is 10 MB or more."""
            whole, tables = compare(a.tpsim, sets, "aiconfigurator-h100-bf16-gemm.csv")
            rows = total = 0
            for name, mape in tables.items():
                m = re.match(r"n=(\d+) k=(\d+) bf16", name)
                if m and 2 * int(m.group(1)) * int(m.group(2)) >= 10_000_000:
                    n = AIC_ROWS_PER_TABLE
                    rows += n
                    total += n * mape
            return whole, total / rows
        rows = []
        grid = {
            "tensor_efficiency": [0.74, 0.78, 0.80, 0.82, 0.84, 0.86],
            "hbm_efficiency": [0.85, 0.87, 0.90],
            "kernel_overhead_us": [4.5, 5, 5.5],
            "operand_flops_per_byte": [50, 60, 70, 80, 90],
        }
        for values in itertools.product(*grid.values()):
            sets = dict(zip(grid, values))
            fp16 = compare(a.tpsim, sets, "vidur-h100-gemm.csv")[0]
            bf16 = compare(a.tpsim, sets, "xla-h100-bf16-matmul.csv")[0]
            graphs = aic(sets)
            rows.append((max(fp16, bf16, graphs[1]), fp16, bf16, graphs, sets))
        rows.sort(key=lambda r: (r[0], r[1] + r[2] + r[3][1]))
        shipped = (compare(a.tpsim, {}, "vidur-h100-gemm.csv")[0], compare(a.tpsim, {}, "xla-h100-bf16-matmul.csv")[0]) + aic({})
        print("GEMM, shipped constants: vidur-h100-gemm.csv %.2f %%, xla-h100-bf16-matmul.csv %.2f %%, "
              "aiconfigurator-h100-bf16-gemm.csv %.2f %% (weights >= 10 MB %.2f %%)" % shipped)
        for worst, fp16, bf16, graphs, sets in rows[:5]:
            print("GEMM fit: vidur %.2f %%, xla %.2f %%, aiconfigurator %.2f %% (weights >= 10 MB %.2f %%) with %s"
                  % (fp16, bf16, graphs[0], graphs[1], sets))
        if a.gemm_only:
            return
    kernel = search(a.tpsim, {"collective_kernel_us": [x / 4 for x in range(0, 33)]},
                    lambda s: compare(a.tpsim, s, "nccl-tests-h100-4gpu-graph.csv")[0])
    print("collective kernel (nccl-tests-h100-4gpu-graph.csv): MAPE %.2f %% with %s" % kernel)
    fixed = dict(kernel[1], collective_launch_exponent=5)

    def targets(sets, files):
        """The issue-14 target tables (algorithm auto, or the ring-forced 8-GPU ones) of `files`."""
        out = []
        for f in files:
            for name, mape in compare(a.tpsim, sets, f)[1].items():
                op_ok = re.match(r"(all_reduce|all_gather|reduce_scatter),", name)
                auto = "algorithm auto, protocol auto" in name and "device time" not in name
                ring8 = f.startswith("nccl-tests-h100-8gpu-r") and "algorithm ring" in name
                if op_ok and (auto or ring8):
                    out.append(mape)
        return out

    def ring_score(s, base=None):
        sets = dict(fixed if base is None else base, **s)
        t = targets(sets, ["nccl-tests-h100-4gpu.csv", "nccl-tests-h100-8gpu-ring.csv",
                           "nccl-tests-h100-8gpu-rs-ring-nccl1047.csv", "nccl-tests-h100-allreduce-2-6gpu.csv"])
        graph = compare(a.tpsim, sets, "nccl-tests-h100-4gpu-graph.csv")[0]
        return sum(t) + graph + 100 * sum(1 for x in t if x > 8)

    launch = [(12, 3.2), (13, 2.9), (14, 2.625), (15, 2.4)]  # about 24.5 us at 4 GPUs, 35 to 38 at 8
    best = None
    for base, per_gpu in launch:
        r = search(a.tpsim, {
            "collective_launch_us": [base], "collective_launch_per_gpu_us": [per_gpu],
            "ring_ll128_step_us": [0.9, 1.2, 1.5], "ring_simple_step_us": [4.0, 5.0, 6.0],
            "ring_efficiency": [0.90, 0.92, 0.94, 0.96], "ring_allreduce_efficiency": [0.96, 0.97, 0.98],
        }, ring_score)
        if best is None or r[0] < best[0]:
            best = r
    print("ring and host (4-GPU, 8-GPU ring, nccl#1047, 2-6 GPU tables): score %.2f with %s" % best)
    coll = (best[0], dict(fixed, **best[1]))

    def nvls_score(s, base=None):
        sets = dict(coll[1] if base is None else base, **s)
        t = [v for k, v in compare(a.tpsim, sets, "nccl-tests-h100-allreduce-algo.csv")[1].items() if "algorithm nvls" in k]
        t += [v for k, v in compare(a.tpsim, sets, "nccl-tests-h100-4gpu-forced.csv")[1].items() if "algorithm nvls" in k]
        t += [v for k, v in compare(a.tpsim, sets, "nccl-tests-h100-allreduce-2-6gpu.csv")[1].items() if "6 ranks" in k]
        auto8 = compare(a.tpsim, sets, "nccl-tests-h100-8gpu-allreduce-auto.csv")[0]
        return sum(t) + auto8 + 100 * (auto8 > 8)

    nvls = search(a.tpsim, {
        "nvls_efficiency": [0.80, 0.84, 0.88],
        "nvls_rank_loss": [0.5, 0.6, 0.7],
        "nvls_chunk_rtt_us": [0, 0.6, 0.65, 0.7, 0.8],
    }, nvls_score)
    print("NVLS (-allreduce-algo, -4gpu-forced, -2-6gpu 6 ranks, -8gpu-allreduce-auto): score %.2f with %s" % nvls)
    fitted = dict(coll[1], **nvls[1])
    # The stages run one after another, so they need not land on the joint optimum: print the
    # shipped chip file's own scores beside them (a near-tie is expected, see README).
    print("shipped h100-sxm-8 constants: ring and host score %.2f, NVLS score %.2f" %
          (ring_score({}, base={}), nvls_score({}, base={})))

    def two_gpu_rings(s):
        sets = dict(fitted, **s)
        auto = compare(a.tpsim, sets, "nccl-tests-h100-allreduce-2-6gpu.csv")[1]
        forced = compare(a.tpsim, sets, "nccl-tests-h100-allreduce-algo.csv")[1]
        return (auto["all_reduce, 2 ranks, algorithm auto, protocol auto"] +
                forced["all_reduce, 2 ranks, algorithm ring, protocol auto"])

    ring2 = search(a.tpsim, {"ring_channel_memory_gbps": [0, 48, 50, 51, 52, 53, 54, 55, 56, 58, 60]}, two_gpu_rings)
    print("2-GPU ring (nccl-tests-h100-allreduce-2-6gpu.csv, -algo.csv): sum of 2-GPU ring table MAPEs "
          "%.2f %% with %s" % ring2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
