#!/usr/bin/env python3
"""Runs BookSim2 on the traffic tpsim's TLM network is checked against and writes CSVs.

Usage: booksim_reference.py BOOKSIM_BINARY BOOKSIM_COMMIT OUT_DIR [--jobs N] [--only TOPO]

For each topology (validate/noc/booksim/<topo>.cfg) and traffic pattern it runs BookSim
at offered loads of 10%, 20%, ..., 100% of the pattern's ideal capacity under
dimension-order routing (the load at which the busiest channel, injection or ejection
port would be fully used), plus one run at 1.0 flit/node/cycle in throughput mode for
the saturation throughput, and writes OUT_DIR/booksim2-<topo>.csv with the commit,
the configuration file's text and one row per run. Loads are flits per node per cycle.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOPOLOGIES = {"mesh4x4": ("mesh", 4), "mesh8x8": ("mesh", 8), "torus8x8": ("torus", 8)}
FRACTIONS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


def patterns(k):
    n = k * k
    centre = (k // 2) * k + k // 2
    # name -> (BookSim traffic string, destination function for the capacity estimate)
    return {
        "uniform": ("uniform", None),
        "transpose": ("transpose", lambda s: (s % k) * k + s // k),
        # all nodes send to the node at (k/2, k/2)
        "hotspot": ("hotspot({%d})" % centre, lambda s: centre),
        # BookSim's neighbor: (x+1, y+1) modulo k
        "neighbor": ("neighbor", lambda s: ((s // k + 1) % k) * k + (s % k + 1) % k),
        # one step of a ring all-reduce over the cores in row-major order: i -> i+1 mod N
        # (BookSim's neighbor pattern with one digit of radix N)
        "ring_step": ("neighbor({%d,1,1})" % n, lambda s: (s + 1) % n),
    }


def dor_links(topo, k, s, d):
    """Directed channels (a, b) of the X-then-Y route from s to d with their weight (1):
    on a torus, the shorter way round, the positive way on a tie (tpsim's routes, and
    BookSim2's once booksim_reference.sh has changed its tie rule)."""
    out = []

    def walk(pos, dst, fixed, horizontal):
        paths = []
        if pos == dst:
            return [([], 1.0)]
        if topo == "mesh":
            dirs = [1 if dst > pos else -1]
        else:
            fwd = (dst - pos) % k
            dirs = [1] if 2 * fwd <= k else [-1]
        for step in dirs:
            hops = []
            p = pos
            while p != dst:
                q = (p + step) % k
                a = (fixed, p) if horizontal else (p, fixed)
                b = (fixed, q) if horizontal else (q, fixed)
                hops.append((a[0] * k + a[1], b[0] * k + b[1]))
                p = q
            paths.append((hops, 1.0 / len(dirs)))
        return paths

    sr, sc = divmod(s, k)
    dr, dc = divmod(d, k)
    for xh, xw in walk(sc, dc, sr, True):
        for yh, yw in walk(sr, dr, dc, False):
            out.append((xh + yh, xw * yw))
    return out


def ideal_capacity(topo, k, dest):
    """Offered flits/node/cycle at which the busiest channel or port is fully used."""
    n = k * k
    load = {}
    eject = [0.0] * n
    for s in range(n):
        dests = [(d, 1.0 / n) for d in range(n)] if dest is None else [(dest(s), 1.0)]
        for d, p in dests:
            eject[d] += p
            for hops, w in dor_links(topo, k, s, d):
                for h in hops:
                    load[h] = load.get(h, 0.0) + p * w
    busiest = max([1.0] + eject + list(load.values()))  # injection port: 1 per node
    return 1.0 / busiest


def parse(text):
    """Average packet latency, network latency and accepted flit rate (overall stats when the
    run converged, else the last sample's accepted rate)."""
    def last(pattern):
        found = re.findall(pattern, text)
        return float(found[-1]) if found else None

    stable = "====== Overall Traffic Statistics ======" in text and "unstable" not in text
    if stable:
        overall = text.split("====== Overall Traffic Statistics ======")[1]
        lat = re.search(r"Packet latency average = ([0-9.e+-]+)", overall)
        net = re.search(r"Network latency average = ([0-9.e+-]+)", overall)
        acc = re.search(r"Accepted flit rate average = ([0-9.e+-]+)", overall)
        return True, float(lat.group(1)), float(net.group(1)), float(acc.group(1))
    # per-sample lines read "Accepted flit rate average= X" (no space before '=')
    return False, None, None, last(r"Accepted flit rate average ?= ([0-9.e+-]+)")


def run_one(binary, cfg, traffic, rate, sim_type):
    args = [binary, cfg, "traffic=%s" % traffic, "injection_rate=%.6f" % rate, "sim_type=%s" % sim_type]
    res = subprocess.run(args, capture_output=True, text=True, check=False)
    return parse(res.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("commit")
    ap.add_argument("out_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", choices=sorted(TOPOLOGIES))
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name, (topo, k) in TOPOLOGIES.items():
        if a.only and name != a.only:
            continue
        cfg = os.path.join(HERE, "booksim", name + ".cfg")
        jobs = []
        for pname, (traffic, dest) in patterns(k).items():
            cap = ideal_capacity(topo, k, dest)
            for f in FRACTIONS:
                jobs.append((pname, traffic, cap, f, round(f * cap, 6), "latency"))
            jobs.append((pname, traffic, cap, None, 1.0, "throughput"))
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            results = list(ex.map(lambda j: run_one(a.binary, cfg, j[1], j[4], j[5]), jobs))
        path = os.path.join(a.out_dir, "booksim2-%s.csv" % name)
        with open(path, "w") as f:
            f.write("# BookSim2 (https://github.com/booksim/booksim2) commit %s\n" % a.commit)
            f.write("# written by validate/noc/booksim_reference.sh; configuration file %s:\n"
                    % os.path.relpath(cfg, os.path.dirname(os.path.dirname(HERE))))
            with open(cfg) as c:
                for line in c.read().splitlines():
                    f.write("#   " + line + "\n")
            f.write("# traffic and injection_rate per row (BookSim overrides: traffic=..., injection_rate=..., "
                    "sim_type=latency; the saturation row sim_type=throughput at 1.0)\n")
            f.write("# ideal_capacity: flits/node/cycle at which the busiest channel or port of the DOR routes "
                    "is fully used; latencies in cycles; rates in flits/node/cycle\n")
            f.write("topology,pattern,booksim_traffic,ideal_capacity,offered,stable,packet_latency,"
                    "network_latency,accepted\n")
            for (pname, traffic, cap, frac, rate, sim_type), (stable, lat, net, acc) in zip(jobs, results):
                kind = "saturation" if sim_type == "throughput" else ("1" if stable else "0")
                fmt = lambda v: "" if v is None else "%.4f" % v
                f.write("%s,%s,\"%s\",%.6f,%.6f,%s,%s,%s,%s\n" % (name, pname, traffic, cap, rate, kind, fmt(lat),
                                                                 fmt(net), fmt(acc)))
        print("wrote %s (%d runs)" % (path, len(jobs)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
