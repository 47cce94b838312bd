#!/usr/bin/env python3
"""The regression corpus: golden result summaries, diffed byte for byte.

Each case runs the tpsim binary once (run, serve or sweep) and reduces its output to
a small text summary: the result's summary and per-layer rows verbatim, a SHA-256 of
every bulky section (per-op table, links, DRAM channels, cores, resolved config) and
whatever tpsim printed on stderr. A change that moves any number changes a summary.

  regress.py --tpsim build/bin/tpsim            check: print a diff per changed case, exit 1
  regress.py --tpsim build/bin/tpsim --update   rewrite golden/ (then review `git diff`)
  regress.py --list                             the cases, one per line

--filter REGEX restricts to the cases whose name matches; --jobs N runs N at once
(default: the machine's cores). A change meant to move numbers runs --update and says
why in its commit; any other change leaves golden/ byte-identical.
"""
import argparse
import concurrent.futures
import csv
import difflib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(HERE, "golden")

REF = "configs/experiments/reference-qwen3-4b.textproto"
PARTITIONS = ["k_split", "n_split", "m_split_rotate", "mn_2d", "megatron"]
COLLECTIVES = ["ring", "bidirectional_ring", "mesh_2d", "halving_doubling", "direct"]
PLACEMENTS = ["linear", "linear_interleave", "snake", "ring", "block", "random", "file"]
# Relative to ROOT (every case runs there): the path is part of the resolved config that the
# summaries hash, so an absolute one would tie the golden files to one checkout's location.
PLACEMENT_FILE = "tests/regression/reversed-placement.txt"


def cases():
    """(name, kind, args) for every case, in a fixed order."""
    out = []
    experiments = sorted(
        [os.path.join("configs/experiments", f) for f in os.listdir(os.path.join(ROOT, "configs/experiments"))]
        + [os.path.join("validate/experiments", f) for f in os.listdir(os.path.join(ROOT, "validate/experiments"))])
    for e in experiments:
        if not e.endswith(".textproto"):
            continue
        stem = os.path.basename(e)[: -len(".textproto")]
        for engine in ("analytical", "tlm"):
            out.append((f"run-{stem}-{engine}", "run", [e, "--engine", engine]))
    # The reference experiment across every partitioner x collective x placement.
    for p in PARTITIONS:
        for c in COLLECTIVES:
            for pl in PLACEMENTS:
                args = [REF, "--set", f"mapping.partition={p}", "--set", f"mapping.collective={c}",
                        "--set", f"mapping.placement={pl}"]
                if pl == "file":
                    args += ["--set", f"mapping.placement_file={PLACEMENT_FILE}"]
                out.append((f"ref-{p}-{c}-{pl}", "run", args))
    # Each partitioner on the TLM engine, and mapping variants that take other paths.
    for p in PARTITIONS:
        out.append((f"ref-{p}-tlm", "run", [REF, "--engine", "tlm", "--set", f"mapping.partition={p}"]))
    variants = {
        "ref-long-prompt-spills": ["--set", "workload.seq_len=4096", "--set", "workload.decode_steps=2"],
        # Weights pinned in SRAM must fit there (50.5 MB a core): 64 MiB of SRAM.
        "ref-weights-sram": ["--set", "mapping.weights=sram", "--set", "chip.core.sram_bytes=67108864"],
        "ref-mn2d-kvdram-4096": ["--set", "mapping.partition=mn_2d", "--set", "workload.seq_len=4096",
                                 "--set", "workload.decode_steps=1"],
        "ref-batch3": ["--set", "workload.batch=3", "--set", "workload.decode_steps=3"],
        "ref-tp16-ring-bidir": ["--set", "mapping.tp=16", "--set", "mapping.pipeline_stages=4",
                                "--set", "mapping.placement=ring", "--set",
                                "mapping.collective=bidirectional_ring", "--set", "workload.decode_steps=2"],
        "ref-tp16-mn2d-ksteps": ["--set", "mapping.tp=16", "--set", "mapping.pipeline_stages=4",
                                 "--set", "mapping.partition=mn_2d", "--set", "mapping.mn_2d_weights=k_steps",
                                 "--set", "workload.decode_steps=2"],
        "ref-tp16-mn2d-grid4": ["--set", "mapping.tp=16", "--set", "mapping.pipeline_stages=4",
                                "--set", "mapping.partition=mn_2d", "--set", "mapping.grid_rows=4",
                                "--set", "workload.decode_steps=2"],
        "ref-link10": ["--set", "chip.noc.link_bandwidth_gbps=10", "--set", "mapping.partition=m_split_rotate",
                       "--set", "workload.seq_len=64", "--set", "workload.decode_steps=2"],
        "ref-cached-prefix": ["--set", "workload.cached_prefix=512", "--set", "workload.decode_steps=2"],
    }
    for name, extra in variants.items():
        out.append((name, "run", [REF] + extra))
        out.append((name + "-tlm", "run", [REF, "--engine", "tlm"] + extra))
    for e in ("validate/experiments/qwen3-4b-h200.textproto", "validate/experiments/llama-3.1-8b-h200.textproto"):
        stem = os.path.basename(e)[: -len(".textproto")]
        for engine in ("analytical", "tlm"):
            out.append((f"run-{stem}-nvls-{engine}", "run", [e, "--engine", engine, "--set",
                                                            "mapping.collective=nvls"]))
    # MoE dispatch / combine algorithms (mapping.moe.all_to_all) on the wafer experiment.
    moe = "configs/experiments/moe-qwen3-30b-a3b.textproto"
    for a, engines in (("pairwise", ("analytical", "tlm")), ("hierarchical", ("analytical", "tlm")),
                       ("auto", ("analytical",))):
        for engine in engines:
            out.append((f"run-moe-qwen3-30b-a3b-a2a-{a}-{engine}", "run",
                        [moe, "--engine", engine, "--set", f"mapping.moe.all_to_all={a}"]))
    # Attention replicas (mapping.attention_dp) against attention TP 16 on the same cores, and the
    # expert groups' order (mapping.moe.group_order).
    dp = "configs/experiments/moe-qwen3-30b-a3b-dp.textproto"
    out.append(("run-moe-qwen3-30b-a3b-dp-tp16-analytical", "run",
                [dp, "--set", "mapping.tp=16", "--set", "mapping.attention_dp=1"]))
    out.append(("run-moe-qwen3-30b-a3b-dp-ep-inner-analytical", "run",
                [dp, "--set", "mapping.moe.ep=4", "--set", "mapping.moe.tp=4", "--set", "mapping.moe.routing=zipf",
                 "--set", "mapping.moe.zipf_s=1.2", "--set", "mapping.moe.group_order=ep_inner"]))
    # Serving.
    for e in ("serving-fused", "serving-disaggregated"):
        path = f"configs/experiments/{e}.textproto"
        out.append((f"serve-{e}", "serve", [path]))
        out.append((f"serve-{e}-slo", "serve", [path, "--slo-ttft-ms", "30000", "--slo-tpot-ms", "500"]))
    out.append(("serve-serving-fused-tlm", "serve", ["configs/experiments/serving-fused.textproto", "--engine",
                                                     "tlm", "--set", "workload.requests.synthetic.num_requests=20"]))
    # A sweep's stored rows.
    out.append(("sweep-readme-seq-partition", "sweep", ["configs/sweeps/readme-seq-partition.textproto"]))
    return out


def sha(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def canon(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def stderr_lines(text):
    # Wall-clock progress lines would make the corpus flaky; tpsim prints none on these cases.
    return [l for l in text.splitlines() if l.strip()]


def run_case(tpsim, name, kind, args):
    with tempfile.TemporaryDirectory(prefix="tpsim-regress-") as tmp:
        lines = [f"# tpsim {kind} " + " ".join(a.replace(ROOT + '/', '') for a in args)]
        if kind == "run":
            out = os.path.join(tmp, "r.json")
            p = subprocess.run([tpsim, "run"] + args + ["--out", out, "--quiet"], cwd=ROOT,
                               capture_output=True, text=True)
            lines.append(f"exit {p.returncode}")
            lines += ["stderr: " + l for l in stderr_lines(p.stderr)]
            if p.returncode == 0:
                with open(out, "rb") as f:
                    raw = f.read()
                d = json.loads(raw)
                lines.append(f"experiment {d.get('experiment')}")
                lines.append(f"engine {d.get('engine')}")
                lines.append("summary")
                for k, v in d.get("summary", {}).items():
                    lines.append(f"  {k} {json.dumps(v)}")
                lines.append("layers")
                for row in d.get("layers", []):
                    lines.append("  " + " ".join(str(row.get(k)) for k in ("phase", "layer", "total_ps")))
                lines.append("sections")
                for k in ("ops", "links", "dram", "cores", "tasks", "config"):
                    v = d.get(k)
                    n = len(v) if isinstance(v, list) else 1
                    lines.append(f"  {k} {n} {sha(canon(v))}")
                lines.append(f"  file {sha(raw)}")
        elif kind == "serve":
            rq = os.path.join(tmp, "requests.csv")
            kv = os.path.join(tmp, "kv.csv")
            p = subprocess.run([tpsim, "serve"] + args + ["--requests-csv", rq, "--kv-csv", kv], cwd=ROOT,
                               capture_output=True, text=True)
            lines.append(f"exit {p.returncode}")
            lines += ["stdout: " + l for l in p.stdout.splitlines()]
            lines += ["stderr: " + l for l in stderr_lines(p.stderr)]
            for label, path in (("requests.csv", rq), ("kv.csv", kv)):
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        data = f.read()
                    nl = data.count(b"\n")
                    lines.append(f"{label} {nl} lines {sha(data)}")
        elif kind == "sweep":
            db = os.path.join(tmp, "s.sqlite")
            c = os.path.join(tmp, "s.csv")
            p = subprocess.run([tpsim, "sweep"] + args + ["--db", db, "--csv", c, "--jobs", "1"], cwd=ROOT,
                               capture_output=True, text=True)
            lines.append(f"exit {p.returncode}")
            if os.path.exists(c):
                with open(c, newline="") as f:
                    rows = list(csv.reader(f))
                drop = {i for i, h in enumerate(rows[0]) if h in ("wall_ms",)} if rows else set()
                for r in rows:
                    lines.append("  " + ",".join(v for i, v in enumerate(r) if i not in drop))
        return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tpsim", default=os.path.join(ROOT, "build/bin/tpsim"))
    ap.add_argument("--update", action="store_true", help="rewrite golden/ with this binary's output")
    ap.add_argument("--filter", default="", help="only cases whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    todo = [c for c in cases() if re.search(a.filter, c[0])]
    if a.list:
        for name, kind, args in todo:
            print(name, kind, " ".join(args))
        return 0
    tpsim = os.path.abspath(a.tpsim)
    if not os.access(tpsim, os.X_OK):
        print(f"regress.py: no tpsim binary at {tpsim}", file=sys.stderr)
        return 2
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        results = list(pool.map(lambda c: (c[0], run_case(tpsim, *c)), todo))
    os.makedirs(GOLDEN, exist_ok=True)
    changed = missing = 0
    for name, text in results:
        path = os.path.join(GOLDEN, name + ".txt")
        old = open(path).read() if os.path.exists(path) else None
        if old == text:
            continue
        if old is None:
            missing += 1
            print(f"NEW {name}")
        else:
            changed += 1
            print(f"CHANGED {name}")
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       "golden/" + name + ".txt", "now/" + name + ".txt", n=1))
        if a.update:
            with open(path, "w") as f:
                f.write(text)
    if not a.filter:
        known = {n + ".txt" for n, _, _ in todo}
        for f in sorted(os.listdir(GOLDEN)):
            if f not in known:
                print(f"STALE golden/{f} (no such case)")
                if a.update:
                    os.remove(os.path.join(GOLDEN, f))
                else:
                    changed += 1
    print(f"regression corpus: {len(results)} cases, {changed} changed, {missing} new"
          + (" (golden/ rewritten)" if a.update else ""))
    return 0 if a.update or (changed == 0 and missing == 0) else 1


if __name__ == "__main__":
    sys.exit(main())
