#!/usr/bin/env python3
"""tpsim plots (headless: matplotlib's Agg backend).

  tpsim_plot.py heatmap RESULT.json --out links.png
      The chip as a grid: each core coloured by busy fraction (cores[].utilization), each
      directed link by utilisation (links[].utilization), drawn beside its twin.
  tpsim_plot.py timeline RESULT.json --out gantt.png
      A Gantt chart per core from tasks[] (core, kind, op, start_ps, end_ps): one lane each
      for compute, transfer and memory.
  tpsim_plot.py sweep RESULTS.sqlite --x FIELD --y METRIC [--group FIELD] --out sweep.png
      METRIC against FIELD from the table `points`, one line per value of --group. Metrics
      in picoseconds (*_ps) are drawn in us, ms or s (by their largest value); a numeric FIELD spanning 16x or more
      (sequence lengths) gets a log2 axis with a tick per value.
  tpsim_plot.py serving REQUESTS.csv KV.csv --out serving.png
      From `tpsim serve --requests-csv REQUESTS.csv --kv-csv KV.csv`: the CDFs of TTFT and of
      mean TPOT over completed requests (status ok; TPOT of requests with more than one output
      token), and KV-cache blocks used over time per group against its capacity.

RESULT.json is a tpsim Result (configs/schema/result.proto) in JSON, snake_case names.
Node names "r{row}c{col}" place nodes on the grid; cores are numbered row-major on it.
Other node names ("n3" on rings, "switch", memory controllers) go on a circle or a row
below. Every figure is 1000 x 800 pixels (10 x 8 in at 100 dpi); the same input gives the
same bytes. Bad input: a one-line error on stderr and exit status 2.
"""

import argparse
import csv
import json
import math
import os
import re
import sqlite3
import sys

FIGSIZE = (10, 8)
DPI = 100


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def plt_module():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "tpsim"
    return matplotlib, plt


def save(fig, out):
    fig.savefig(out, dpi=DPI, metadata={"Software": None})


def load_result(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except ValueError as e:
        raise UsageError(f"{path}: not JSON: {e}")
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a tpsim result (expected a JSON object)")
    return data


def num(v, what):
    """int64 fields may be numbers or (proto3 JSON) strings."""
    try:
        return float(v)
    except (TypeError, ValueError):
        raise UsageError(f"{what}: {v!r} is not a number")


NODE_RC = re.compile(r"^r(\d+)c(\d+)$")


def grid_shape(data, nodes):
    rows = cols = 0
    cfg = data.get("config", "")
    m = re.search(r"\bnoc\s*\{", cfg) if isinstance(cfg, str) else None
    if m:
        depth, i = 1, m.end()
        while i < len(cfg) and depth:
            depth += {"{": 1, "}": -1}.get(cfg[i], 0)
            i += 1
        block = cfg[m.end():i]
        r = re.search(r"\brows\s*:\s*(\d+)", block)
        c = re.search(r"\bcols\s*:\s*(\d+)", block)
        rows = int(r.group(1)) if r else 0
        cols = int(c.group(1)) if c else 0
    for n in nodes:
        mm = NODE_RC.match(n)
        if mm:
            rows = max(rows, int(mm.group(1)) + 1)
            cols = max(cols, int(mm.group(2)) + 1)
    return rows, cols


def node_positions(names, rows, cols, num_cores):
    """(x, y) per node name; grid nodes at (col, -row)."""
    pos = {}
    others = []
    for n in sorted(names):
        mm = NODE_RC.match(n)
        if mm:
            pos[n] = (int(mm.group(2)), -int(mm.group(1)))
        else:
            others.append(n)
    ring = [n for n in others if re.match(r"^n\d+$", n)]
    ring.sort(key=lambda n: int(n[1:]))
    if ring:
        k = max(len(ring), num_cores)
        radius = max(1.5, k / (2 * math.pi))
        for n in ring:
            a = 2 * math.pi * int(n[1:]) / k
            pos[n] = (radius * math.cos(a), radius * math.sin(a))
    rest = [n for n in others if n not in pos]
    base_y = -(rows if rows else 0) - 1 if not ring else -(max(1.5, len(ring) / (2 * math.pi))) - 1.5
    for i, n in enumerate(rest):
        pos[n] = (i - (len(rest) - 1) / 2 + (cols - 1) / 2 if cols else i, base_y)
    return pos


def cmd_heatmap(args):
    data = load_result(args.result)
    links = data.get("links", [])
    cores = data.get("cores", [])
    if not isinstance(links, list) or not isinstance(cores, list):
        raise UsageError(f"{args.result}: links and cores must be lists")
    if not links and not cores:
        raise UsageError(f"{args.result}: no links[] and no cores[] to draw")
    parsed = []
    names = set()
    for i, l in enumerate(links):
        name = l.get("name", "") if isinstance(l, dict) else ""
        if "->" not in name:
            raise UsageError(f"links[{i}].name {name!r} is not 'src->dst'")
        a, b = name.split("->", 1)
        parsed.append((a, b, num(l.get("utilization", 0), f"links[{i}].utilization")))
        names.update((a, b))
    rows, cols = grid_shape(data, names)
    core_util = {}
    for i, c in enumerate(cores):
        if not isinstance(c, dict):
            raise UsageError(f"cores[{i}] is not an object")
        core_util[int(num(c.get("core", 0), f"cores[{i}].core"))] = num(
            c.get("utilization", 0), f"cores[{i}].utilization")
    core_names = {}
    for k in core_util:
        if rows and cols:
            if k >= rows * cols:
                raise UsageError(f"core {k} is outside the {rows}x{cols} grid")
            core_names[k] = f"r{k // cols}c{k % cols}"
        else:
            core_names[k] = f"n{k}"
    names.update(core_names.values())
    pos = node_positions(names, rows, cols, len(core_util))

    matplotlib, plt = plt_module()
    from matplotlib.patches import FancyArrow, Rectangle
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    core_cmap = plt.get_cmap("Greens")
    link_cmap = plt.get_cmap("inferno_r")
    # Link colours span [0, busiest link]: links of a compute-bound run are busy well
    # under 1% of the time, and an absolute scale would draw them all alike. The colour
    # bar shows the real values. Cores keep the absolute [0, 1] scale.
    link_max = max([u for _, _, u in parsed if u > 0], default=1.0)
    core_norm = matplotlib.colors.Normalize(0, 1)
    link_norm = matplotlib.colors.Normalize(0, link_max)
    size = 0.5
    for k in sorted(core_util):
        x, y = pos[core_names[k]]
        ax.add_patch(Rectangle((x - size / 2, y - size / 2), size, size,
                               facecolor=core_cmap(core_norm(core_util[k])), edgecolor="black", lw=0.8))
        if len(core_util) <= 256:
            ax.text(x, y, f"{k}\n{100 * core_util[k]:.0f}%", ha="center", va="center",
                    color="white" if core_norm(core_util[k]) > 0.6 else "black",
                    fontsize=max(4, 9 - len(core_util) // 32))
    for n in sorted(names - set(core_names.values())):
        x, y = pos[n]
        ax.add_patch(Rectangle((x - size / 3, y - size / 3), 2 * size / 3, 2 * size / 3,
                               facecolor="lightgray", edgecolor="black", lw=0.5))
        ax.text(x, y - size / 2, n, ha="center", va="top", fontsize=6)
    for a, b, u in sorted(parsed, key=lambda t: (t[0], t[1])):
        (x0, y0), (x1, y1) = pos[a], pos[b]
        dx, dy = x1 - x0, y1 - y0
        d = math.hypot(dx, dy)
        if d == 0:
            continue
        ux, uy = dx / d, dy / d
        off = 0.08  # twin links side by side: each shifted to its right
        sx, sy = x0 + ux * size / 2 + uy * off, y0 + uy * size / 2 - ux * off
        length = max(d - size, 0.05)
        ax.add_patch(FancyArrow(sx, sy, ux * length, uy * length, width=0.06, head_width=0.12,
                                head_length=0.08, length_includes_head=True,
                                color=link_cmap(link_norm(u)), lw=0))
    xs = [p[0] for p in pos.values()] or [0]
    ys = [p[1] for p in pos.values()] or [0]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    title = "link utilisation and core busy fraction"
    if data.get("experiment"):
        title = f"{data['experiment']}: {title}"
    ax.set_title(title)
    decimals = max(0, 1 - math.floor(math.log10(link_max * 100)))
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=link_norm, cmap=link_cmap), ax=ax,
                 fraction=0.04, pad=0.02,
                 format=matplotlib.ticker.PercentFormatter(xmax=1.0, decimals=decimals),
                 label="link utilisation (busy time / run time; scale to the busiest link)")
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=core_norm, cmap=core_cmap), ax=ax,
                 orientation="horizontal", fraction=0.04, pad=0.03,
                 format=matplotlib.ticker.PercentFormatter(xmax=1.0, decimals=0),
                 label="core busy fraction")
    save(fig, args.out)


KINDS = ("compute", "transfer", "memory")
KIND_COLOURS = {"compute": "tab:blue", "transfer": "tab:orange", "memory": "tab:green"}


def cmd_timeline(args):
    data = load_result(args.result)
    tasks = data.get("tasks", [])
    if not isinstance(tasks, list) or not tasks:
        raise UsageError(f"{args.result}: no tasks[] (run with --tasks)")
    bars = {}
    end_max = 0.0
    for i, t in enumerate(tasks):
        if not isinstance(t, dict):
            raise UsageError(f"tasks[{i}] is not an object")
        kind = t.get("kind", "")
        if kind not in KINDS:
            raise UsageError(f"tasks[{i}].kind {kind!r} is not one of {', '.join(KINDS)}")
        core = int(num(t.get("core", 0), f"tasks[{i}].core"))
        s = num(t.get("start_ps", 0), f"tasks[{i}].start_ps")
        e = num(t.get("end_ps", 0), f"tasks[{i}].end_ps")
        if e < s:
            raise UsageError(f"tasks[{i}]: end_ps {e:.0f} before start_ps {s:.0f}")
        bars.setdefault((core, kind), []).append((s / 1e6, (e - s) / 1e6))
        end_max = max(end_max, e / 1e6)
    cores = sorted({c for c, _ in bars})
    row = {c: i for i, c in enumerate(cores)}
    matplotlib, plt = plt_module()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    lane = 1.0 / len(KINDS)
    for (core, kind) in sorted(bars):
        k = KINDS.index(kind)
        y = row[core] + k * lane + lane * 0.1
        spans = sorted(bars[(core, kind)])
        ax.broken_barh(spans, (y, lane * 0.8), facecolors=KIND_COLOURS[kind], edgecolor="none")
    for r in range(1, len(cores)):
        ax.axhline(r, color="lightgray", lw=0.5)
    ax.set_ylim(len(cores), 0)
    ax.set_xlim(0, end_max * 1.01 if end_max > 0 else 1)
    step = max(1, len(cores) // 32)
    ax.set_yticks([row[c] + 0.5 for c in cores[::step]])
    ax.set_yticklabels([f"core {c}" for c in cores[::step]], fontsize=7)
    ax.set_xlabel("time (us)")
    title = "tasks per core"
    if data.get("experiment"):
        title = f"{data['experiment']}: {title}"
    ax.set_title(title)
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=KIND_COLOURS[k], label=k) for k in KINDS], loc="upper right",
              fontsize=8)
    fig.tight_layout()
    save(fig, args.out)


def cmd_sweep(args):
    if not os.path.exists(args.db):
        raise UsageError(f"cannot read {args.db}: no such file")
    try:
        con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
        cols = [r[1] for r in con.execute("PRAGMA table_info(points)")]
    except sqlite3.Error as e:
        raise UsageError(f"{args.db}: {e}")
    if not cols:
        raise UsageError(f"{args.db}: no table 'points'")
    wanted = [("--x", args.x), ("--y", args.y)] + ([("--group", args.group)] if args.group else [])
    for flag, c in wanted:
        if c not in cols:
            raise UsageError(f"{flag} {c}: no column '{c}' in points (columns: {', '.join(cols)})")
    q = lambda c: '"' + c.replace('"', '""') + '"'
    sel = f"SELECT {q(args.x)}, {q(args.y)}, {q(args.group) if args.group else 'NULL'} FROM points"
    try:
        rows = con.execute(sel).fetchall()
    except sqlite3.Error as e:
        raise UsageError(f"{args.db}: {e}")
    if not rows:
        raise UsageError(f"{args.db}: table points is empty")
    numeric_x = all(isinstance(r[0], (int, float)) for r in rows if r[0] is not None)
    xcats = sorted({str(r[0]) for r in rows}) if not numeric_x else None
    series = {}
    for x, y, g in rows:
        if x is None or y is None:
            continue
        if not isinstance(y, (int, float)):
            raise UsageError(f"--y {args.y}: value {y!r} is not a number")
        xv = x if numeric_x else xcats.index(str(x))
        series.setdefault("" if g is None else str(g), []).append((xv, y))
    if not series:
        raise UsageError(f"{args.db}: no rows with both {args.x} and {args.y}")
    # Picosecond metrics read best in microseconds.
    scale, ylabel = 1.0, args.y
    if args.y.endswith("_ps"):
        ymax = max((abs(y) for _, y, _ in rows if isinstance(y, (int, float))), default=0)
        scale, unit = next((f, u) for f, u, lim in ((1e-12, "s", 1e12), (1e-9, "ms", 1e9), (1e-6, "us", 0))
                           if ymax >= lim)
        ylabel = f"{args.y[:-3]} ({unit})"
    matplotlib, plt = plt_module()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    def gkey(g):
        try:
            return (0, float(g), g)
        except ValueError:
            return (1, 0.0, g)
    for g in sorted(series, key=gkey):
        pts = sorted(series[g])
        ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], marker="o",
                label=f"{args.group}={g}" if args.group else None)
    if not numeric_x:
        ax.set_xticks(range(len(xcats)))
        ax.set_xticklabels(xcats, rotation=30, ha="right", fontsize=8)
    else:
        xs = sorted({p[0] for pts in series.values() for p in pts})
        if xs[0] > 0 and xs[-1] / xs[0] >= 16:  # e.g. sequence lengths 128 ... 8192
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs)
            ax.set_xticklabels([f"{x:g}" for x in xs], fontsize=8)
            ax.minorticks_off()
    ax.set_xlabel(args.x)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if args.group:
        ax.legend(fontsize=8)
    ax.set_title(f"{ylabel} vs {args.x}" + (f" by {args.group}" if args.group else ""))
    fig.tight_layout()
    save(fig, args.out)


REQ_COLUMNS = ("id", "output_tokens", "ttft_ms", "mean_tpot_ms", "status")
KV_COLUMNS = ("group", "time_ms", "kv_blocks_used", "kv_blocks_capacity")


def read_csv(path, columns):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except (csv.Error, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not CSV: {e}")
    missing = [c for c in columns if c not in header]
    if missing:
        raise UsageError(f"{path}: missing column(s) {', '.join(missing)}")
    if not rows:
        raise UsageError(f"{path}: no rows")
    return rows


def cdf_points(values):
    v = sorted(values)
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def cmd_serving(args):
    reqs = read_csv(args.requests, REQ_COLUMNS)
    kv = read_csv(args.kv, KV_COLUMNS)
    ttft, tpot = [], []
    for i, r in enumerate(reqs):
        if r["status"] != "ok":
            continue
        ttft.append(num(r["ttft_ms"], f"{args.requests} row {i + 2} ttft_ms"))
        if num(r["output_tokens"], f"{args.requests} row {i + 2} output_tokens") > 1:
            tpot.append(num(r["mean_tpot_ms"], f"{args.requests} row {i + 2} mean_tpot_ms"))
    if not ttft:
        raise UsageError(f"{args.requests}: no completed requests (status ok)")
    groups = {}
    for i, r in enumerate(kv):
        g = groups.setdefault(r["group"], {"t": [], "used": [], "cap": 0.0})
        g["t"].append(num(r["time_ms"], f"{args.kv} row {i + 2} time_ms") / 1e3)
        g["used"].append(num(r["kv_blocks_used"], f"{args.kv} row {i + 2} kv_blocks_used"))
        g["cap"] = max(g["cap"], num(r["kv_blocks_capacity"], f"{args.kv} row {i + 2} kv_blocks_capacity"))
    matplotlib, plt = plt_module()
    fig = plt.figure(figsize=FIGSIZE, dpi=DPI)
    ax_ttft = fig.add_subplot(2, 2, 1)
    ax_tpot = fig.add_subplot(2, 2, 2)
    ax_kv = fig.add_subplot(2, 1, 2)
    for ax, vals, name in ((ax_ttft, ttft, "TTFT"), (ax_tpot, tpot, "mean TPOT")):
        if vals:
            x, y = cdf_points(vals)
            ax.step(x, y, where="post", color="tab:blue")
            for q, ls in ((0.5, "--"), (0.99, ":")):
                xv = x[min(len(x) - 1, max(0, math.ceil(q * len(x)) - 1))]
                ax.axvline(xv, color="gray", ls=ls, lw=0.8, label=f"p{round(q * 100)} {xv:.1f} ms")
            ax.legend(fontsize=8, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no request with > 1 output token", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{name} CDF ({len(vals)} requests)")
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for k, name in enumerate(sorted(groups)):
        g = groups[name]
        c = colours[k % len(colours)]
        ax_kv.step(g["t"], g["used"], where="pre", color=c, label=f"{name} used")
        if g["cap"] > 0:
            ax_kv.axhline(g["cap"], color=c, ls="--", lw=0.8, label=f"{name} capacity {g['cap']:.0f}")
    ax_kv.set_xlabel("time (s)")
    ax_kv.set_ylabel("KV blocks")
    ax_kv.set_ylim(bottom=0)
    ax_kv.grid(True, alpha=0.3)
    ax_kv.legend(fontsize=8, loc="upper right")
    ax_kv.set_title("KV-cache use over time (blocks held during each iteration)")
    fig.tight_layout()
    save(fig, args.out)


def main(argv):
    p = Parser(prog="tpsim plot", description="tpsim plots")
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    h = sub.add_parser("heatmap", help="link and core utilisation on the chip grid")
    h.add_argument("result")
    h.add_argument("--out", required=True)
    t = sub.add_parser("timeline", help="Gantt chart per core")
    t.add_argument("result")
    t.add_argument("--out", required=True)
    s = sub.add_parser("sweep", help="a metric against a swept field")
    s.add_argument("db")
    s.add_argument("--x", required=True)
    s.add_argument("--y", required=True)
    s.add_argument("--group")
    s.add_argument("--out", required=True)
    v = sub.add_parser("serving", help="TTFT and TPOT CDFs and KV use over time from tpsim serve CSVs")
    v.add_argument("requests")
    v.add_argument("kv")
    v.add_argument("--out", required=True)
    try:
        args = p.parse_args(argv)
        if not args.cmd:
            raise UsageError("expected a subcommand: heatmap, timeline, sweep or serving")
        {"heatmap": cmd_heatmap, "timeline": cmd_timeline, "sweep": cmd_sweep,
         "serving": cmd_serving}[args.cmd](args)
    except UsageError as e:
        print(f"tpsim plot: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tpsim plot: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    except Exception as e:  # a malformed field deep in the input
        print(f"tpsim plot: bad input: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
