"""`tpsim plot timeline RESULT.json`: a Gantt chart from tasks[] (tpsim run --tasks --out).

One row per core, with a lane each for compute, transfer and memory tasks. For large chips,
--cores picks cores, --window a time span, and --group draws one row per group of cores
instead (a lane's shade is the fraction of the group's cores busy with that kind of task).
"""

import math
import re
import sys

from plot_common import (DPI, FIGSIZE, TIME_UNITS, UINT32_MAX, UsageError, chip_cores, duration,
                         dump_json, load_result, num, plt_module, save, whole, OUT_HELP)

KINDS = ("compute", "transfer", "memory")
KIND_COLOURS = {"compute": "tab:blue", "transfer": "tab:orange", "memory": "tab:green"}
HELP = __doc__


def add_arguments(t):
    t.add_argument("result", metavar="RESULT.json", help="a result with tasks[] (tpsim run --tasks --out)")
    t.add_argument("--cores", metavar="LIST",
                   help="only these cores: ids and ranges, e.g. 0-7,16,32-39")
    t.add_argument("--window", metavar="T0:T1",
                   help="only this time span; times in us unless they carry a unit (ns, us, ms, "
                        "s); either end may be left out (100: , :2ms)")
    t.add_argument("--group", choices=("tp", "stage"),
                   help="one row per group of cores: stage (the cores computing the same layers, "
                        "i.e. a pipeline stage) or tp (the cores joined by transfers within a "
                        "stage: its TP group; tpsim places one TP group per stage, so the two "
                        "agree unless a stage's cores never exchange data)")
    t.add_argument("--title", help="the figure title")
    t.add_argument("--dump-series", metavar="FILE",
                   help="also write the drawn rows and bars as JSON (times in us)")
    t.add_argument("--out", required=True, metavar="PNG", help=OUT_HELP)


def parse_cores(spec):
    """The ranges (a, b) of --cores, not their ids: a range is never expanded (0-9999999999 took
    24 GB and failed)."""
    out = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise UsageError(f"--cores {spec!r}: {part!r} is not a core id or a range a-b")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a:
            raise UsageError(f"--cores {spec!r}: range {part!r} runs backwards")
        out.append((a, b))
    return out


def missing_cores(ranges, present):
    """The runs of ids in `ranges` that are not in the sorted list `present`, as fmt_cores
    writes them."""
    runs = []
    for a, b in sorted(ranges):
        if runs and a <= runs[-1][1] + 1:  # merge overlapping or touching ranges
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    out = []
    for a, b in runs:
        for c in (c for c in present if a <= c <= b):
            if c > a:
                out.append(f"{a}-{c - 1}" if c - 1 > a else f"{a}")
            a = c + 1
        if a <= b:
            out.append(f"{a}-{b}" if b > a else f"{a}")
    return ",".join(out)


def parse_time_us(text, spec):
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*(ps|ns|us|ms|s)?\s*", text)
    if not m:
        raise UsageError(f"--window {spec!r}: {text!r} is not a time (e.g. 250, 250us, 1.5ms)")
    unit = m.group(2) or "us"
    return num(m.group(1), f"--window {spec!r}") * dict(TIME_UNITS)[unit] / 1e6


def parse_window(spec):
    if spec.count(":") != 1:
        raise UsageError(f"--window {spec!r}: expected T0:T1")
    a, b = spec.split(":")
    t0 = parse_time_us(a, spec) if a.strip() else None
    t1 = parse_time_us(b, spec) if b.strip() else None
    for t in (t0, t1):
        if t is not None and not math.isfinite(t):
            raise UsageError(f"--window {spec!r}: is not a finite time")
    if t0 is not None and t1 is not None and t1 <= t0:
        raise UsageError(f"--window {spec!r}: T1 must be after T0")
    return t0, t1


def read_tasks(path):
    data = load_result(path)
    tasks = data.get("tasks", [])
    if not isinstance(tasks, list) or not tasks:
        raise UsageError(f"{path}: no tasks[] (run with --tasks)")
    ncores = chip_cores(data, path)
    top, why = (ncores - 1, f" (the chip has {ncores} cores, 0..{ncores - 1})") if ncores else (UINT32_MAX, "")
    out = []
    for i, t in enumerate(tasks):
        if not isinstance(t, dict):
            raise UsageError(f"{path}: tasks[{i}] is not an object")
        kind = t.get("kind", "")
        if kind not in KINDS:
            raise UsageError(f"{path}: tasks[{i}].kind {kind!r} is not one of {', '.join(KINDS)}")
        s = duration(t.get("start_ps", 0), f"{path}: tasks[{i}].start_ps")
        e = duration(t.get("end_ps", 0), f"{path}: tasks[{i}].end_ps")
        if e < s:
            raise UsageError(f"{path}: tasks[{i}]: end_ps {e:.0f} before start_ps {s:.0f}")
        out.append({"core": whole(t.get("core", 0), f"{path}: tasks[{i}].core", hi=top, why=why),
                    "dst": whole(t.get("dst_core", -1), f"{path}: tasks[{i}].dst_core", lo=-1, hi=top,
                                 why=why[:-1] + "; -1: none)" if why else " (-1: none)"),
                    "kind": kind, "layer": whole(t.get("layer", 0), f"{path}: tasks[{i}].layer", hi=UINT32_MAX),
                    "s": s / 1e6, "e": e / 1e6})
    return data, out


def groups_of(tasks, how):
    """[(label, [cores])]: stages by the set of layers a core computes (cores without compute
    join the stage of a core they exchange data with, else stay alone); tp: within a stage,
    the connected components of the transfer graph."""
    layers = {}
    for t in tasks:
        if t["kind"] == "compute":
            layers.setdefault(t["core"], set()).add(t["layer"])
    every = sorted({t["core"] for t in tasks})
    stage_of, stages = {}, {}
    for c in every:
        if c in layers:
            key = tuple(sorted(layers[c]))
            stages.setdefault(key, []).append(c)
    order = sorted(stages, key=lambda k: (k[0], k))
    for i, k in enumerate(order):
        for c in stages[k]:
            stage_of[c] = i
    for t in tasks:  # cores that only move data join their partner's stage
        if t["kind"] == "transfer" and t["dst"] >= 0:
            a, b = t["core"], t["dst"]
            if a not in stage_of and b in stage_of:
                stage_of[a] = stage_of[b]
            elif b not in stage_of and a in stage_of:
                stage_of[b] = stage_of[a]
    lonely = [c for c in every if c not in stage_of]
    if how == "stage":
        groups = [(f"stage {i} (layers {fmt_layers(order[i])})",
                   sorted(c for c in stage_of if stage_of[c] == i)) for i in range(len(order))]
        return groups + [(f"core {c}", [c]) for c in lonely]
    parent = {c: c for c in every}

    def find(c):
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for t in tasks:
        if t["kind"] == "transfer" and t["dst"] in parent and \
                stage_of.get(t["core"], -1) == stage_of.get(t["dst"], -2):
            ra, rb = find(t["core"]), find(t["dst"])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    comps = {}
    for c in every:
        comps.setdefault(find(c), []).append(c)
    out = []
    for i, cores in enumerate(sorted(comps.values(), key=lambda g: g[0])):
        st = stage_of.get(cores[0])
        out.append((f"TP group {i}" + (f" (stage {st})" if st is not None else ""), cores))
    return out


def fmt_layers(ls):
    ls = list(ls)
    if len(ls) > 2 and ls == list(range(ls[0], ls[-1] + 1)):
        return f"{ls[0]}-{ls[-1]}"
    return ",".join(str(x) for x in ls)


def fmt_cores(cores):
    runs, start = [], None
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            runs.append(f"{start}-{c}" if c > start else f"{c}")
            start = None
    return ",".join(runs)


def occupancy(spans, size):
    """Piecewise-constant fraction of `size` cores busy: [(start, length, fraction)]."""
    ev = []
    for s, e in spans:
        if e > s:
            ev.append((s, 1))
            ev.append((e, -1))
    ev.sort()
    out, count, prev = [], 0, None
    for t, d in ev:
        if prev is not None and t > prev and count > 0:
            frac = min(1.0, count / size)
            if out and out[-1][0] + out[-1][1] == prev and out[-1][2] == frac:
                out[-1] = (out[-1][0], out[-1][1] + t - prev, frac)
            else:
                out.append((prev, t - prev, frac))
        count += d
        prev = t
    return out


def cmd_timeline(args):
    data, tasks = read_tasks(args.result)
    all_cores = sorted({t["core"] for t in tasks})
    if args.cores:
        ranges = parse_cores(args.cores)
        pick = {c for c in all_cores if any(a <= c <= b for a, b in ranges)}
        if not pick:
            raise UsageError(f"--cores {args.cores}: no task runs on these cores "
                             f"(cores with tasks: {fmt_cores(all_cores)})")
        missing = missing_cores(ranges, all_cores)
        if missing:
            print(f"tpsim plot: --cores: no task on core(s) {missing}", file=sys.stderr)
    else:
        pick = set(all_cores)
    t0, t1 = parse_window(args.window) if args.window else (None, None)
    end_all = max(t["e"] for t in tasks)
    lo = 0.0 if t0 is None else t0
    hi = end_all if t1 is None else t1
    if lo >= end_all and t0 is not None:
        raise UsageError(f"--window {args.window}: starts after the run ends ({end_all:.3f} us)")

    def clip(t):
        s, e = max(t["s"], lo), min(t["e"], hi)
        return (s, e) if e > s else None

    if args.group:
        groups = [(label, [c for c in cores if c in pick]) for label, cores in groups_of(tasks, args.group)]
        groups = [(label, cores) for label, cores in groups if cores]
    else:
        groups = [(f"core {c}", [c]) for c in sorted(pick)]
    rows = []
    for label, cores in groups:
        cs = set(cores)
        bars = {}
        for k in KINDS:
            spans = [clip(t) for t in tasks if t["core"] in cs and t["kind"] == k]
            spans = [sp for sp in spans if sp]
            if args.group:
                bars[k] = occupancy(spans, len(cores))
            else:
                bars[k] = sorted((s, e - s, 1.0) for s, e in spans)
        if args.group:
            label = f"{label}: cores {fmt_cores(cores)}" if len(cores) <= 8 else \
                f"{label}: {len(cores)} cores"
        rows.append({"label": label, "cores": cores, "bars": bars})

    # Drawn in us below 10 ms of span, else ms (or s): the dump keeps us.
    xf, xunit = next(((f, u) for f, u, lim in ((1e-6, "s", 1e7), (1e-3, "ms", 1e4), (1.0, "us", 0))
                      if hi - lo >= lim))
    matplotlib, plt = plt_module()
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    lane = 1.0 / len(KINDS)
    for r, row in enumerate(rows):
        for ki, k in enumerate(KINDS):
            spans = row["bars"][k]
            if not spans:
                continue
            y = r + ki * lane + lane * 0.1
            base = matplotlib.colors.to_rgb(KIND_COLOURS[k])
            faces = [(*base, 0.25 + 0.75 * f) for _, _, f in spans]
            ax.broken_barh([(s * xf, max(d * xf, 1e-12)) for s, d, _ in spans], (y, lane * 0.8), facecolors=faces,
                           edgecolor="none")
    for r in range(1, len(rows)):
        ax.axhline(r, color="lightgray", lw=0.5)
    ax.set_ylim(len(rows), 0)
    ax.set_xlim(lo * xf, (hi if t1 is not None else hi + (hi - lo) * 0.01) * xf)
    step = max(1, len(rows) // 40)
    ax.set_yticks([r + 0.5 for r in range(0, len(rows), step)])
    ax.set_yticklabels([rows[r]["label"] for r in range(0, len(rows), step)],
                       fontsize=7 if len(rows) <= 40 else 6)
    ax.set_xlabel(f"time ({xunit})")
    what = "tasks per core" if not args.group else \
        f"tasks per {'pipeline stage' if args.group == 'stage' else 'TP group'} (shade: share of its cores busy)"
    title = args.title or (f"{data['experiment']}: {what}" if data.get("experiment") else what)
    if not args.title and data.get("title"):
        title += "\n" + data["title"]
    notes = []
    if args.cores:
        notes.append(f"cores {fmt_cores(sorted(pick))}")
    if args.window:
        notes.append(f"window {lo * xf:g}..{hi * xf:g} {xunit}")
    if len(rows) > 40:
        notes.append(f"every {step}th of {len(rows)} rows labelled")
    ax.set_title(title + ("\n" + "; ".join(notes) if notes else ""), fontsize=10)
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=KIND_COLOURS[k], label=k) for k in KINDS], loc="upper right",
              fontsize=8)
    fig.tight_layout()
    dump_json(args.dump_series, {"title": title, "window_us": [lo, hi], "group": args.group,
                                 "rows": [{"label": r["label"], "cores": r["cores"],
                                           "bars": {k: [list(b) for b in r["bars"][k]] for k in KINDS}}
                                          for r in rows]})
    save(fig, args.out)
