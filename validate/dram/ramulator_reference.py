#!/usr/bin/env python3
"""Runs the Ramulator 2.0 load driver over the DRAM kinds tpsim's chips use; writes CSVs.

Usage: ramulator_reference.py DRIVER RAMULATOR_COMMIT OUT_DIR [--jobs N]

For each configuration (validate/dram/ramulator/<name>.yaml) and access pattern (stream:
consecutive 32-byte transactions; random: uniform over the capacity) it runs the driver
(validate/dram/ramulator_load.cc) at offered loads of 10%, 20%, ..., 90% of peak and once
saturating (as fast as the controllers accept), and writes
OUT_DIR/ramulator2-<name>.csv with the commit, the configuration's text and one row per
run: offered and achieved GB/s, mean and median read latency in ns (creation to data
return, so queueing in front of the controller counts).
"""

import argparse
import concurrent.futures
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["hbm3-6400", "stacked-dram-60"]
LOADS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
REQUESTS = 200000
SEED = 1


def run(driver, cfg, pattern, load):
    out = subprocess.run([driver, cfg, pattern, "%.3f" % load, str(REQUESTS), str(SEED)], capture_output=True,
                         text=True, check=True).stdout.split()
    return {out[i]: float(out[i + 1]) for i in range(0, len(out), 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("driver")
    ap.add_argument("commit")
    ap.add_argument("out_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name in CONFIGS:
        cfg = os.path.join(HERE, "ramulator", name + ".yaml")
        jobs = [(p, l) for p in ("stream", "random") for l in LOADS]
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            res = list(ex.map(lambda j: run(a.driver, cfg, j[0], j[1]), jobs))
        path = os.path.join(a.out_dir, "ramulator2-%s.csv" % name)
        with open(path, "w") as f:
            f.write("# Ramulator 2.0 (https://github.com/CMU-SAFARI/ramulator2) commit %s\n" % a.commit)
            f.write("# written by validate/dram/ramulator_reference.sh (driver validate/dram/ramulator_load.cc, "
                    "%d read requests per run, the first 10%% as warm-up, seed %d); configuration %s:\n"
                    % (REQUESTS, SEED, os.path.relpath(cfg, os.path.dirname(os.path.dirname(HERE)))))
            with open(cfg) as c:
                for line in c.read().splitlines():
                    f.write("#   " + line + "\n")
            f.write("# load: offered fraction of peak (1 = saturating); GB/s; latencies in ns\n")
            f.write("config,pattern,load,tx_bytes,peak_gbps,offered_gbps,achieved_gbps,latency_ns,p50_ns\n")
            for (pattern, load), r in zip(jobs, res):
                f.write("%s,%s,%.2f,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n" % (
                    name, pattern, load, r["tx_bytes"], r["peak_gbps"], r["offered_gbps"], r["achieved_gbps"],
                    r["latency_ns"], r["p50_ns"]))
        print("wrote %s (%d runs)" % (path, len(jobs)))


if __name__ == "__main__":
    main()
