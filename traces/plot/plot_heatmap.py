"""`tpsim plot heatmap RESULT.json [RESULT.json ...]`: link heat maps on the chip's grid.

Each result is one panel; all panels share one colour scale (the largest value among them,
or --vmax), so two placements or two chips can be compared by colour. Each directed link is
drawn beside its twin, shifted to its own right (so on a horizontal pair the upper one runs
right to left); cores are shaded by busy fraction. Memory controllers ("mc_*" nodes, outlined
in blue) sit beside the node they attach to, or in a core's corner for memory stacked under
every core (per_core); each panel's title gives its busiest link and its busiest memory
channel by the same metric. With tasks[] in the result (tpsim run --tasks), each
TP group (the cores that compute the same layers: one TP group per pipeline stage) is
outlined in its own colour.
"""

import math
import re

from plot_common import (DPI, UINT32_MAX, UsageError, chip_cores, config_value, dump_json,
                         load_result, nonneg, num, once, plt_module, save, whole, TIME_UNITS,
                         BYTE_UNITS, OUT_HELP)

NODE_RC = re.compile(r"^r(\d+)c(\d+)$")
# metric -> (field in links[] and dram[], colour bar label, kind of unit)
METRICS = {
    "utilization": ("utilization", "link utilisation (busy time / run time)", "fraction"),
    "bytes": ("bytes", "bytes carried", "bytes"),
    "queue": ("max_queue_ps", "longest wait in the link's queue", "time"),
    "busy": ("busy_ps", "busy time", "time"),
}
HELP = __doc__


def add_arguments(h):
    h.add_argument("results", nargs="+", metavar="RESULT.json",
                   help="results of tpsim run --out (one panel each, side by side)")
    h.add_argument("--metric", choices=sorted(METRICS), default="utilization",
                   help="what colours a link: utilization (busy time / run time, default), bytes "
                        "(bytes carried), queue (longest time a transfer waited for the link), "
                        "busy (busy time)")
    h.add_argument("--vmax", metavar="VALUE",
                   help="top of the shared colour scale, with a unit: 40%% or 0.4 (utilization), "
                        "64MiB or 4096 (bytes), 2us, 500ns, 1ms (queue, busy); default: the "
                        "busiest link in any panel")
    h.add_argument("--labels", choices=("auto", "on", "off"), default="auto",
                   help="core id and busy %% in each core: auto (up to 12x12 in one panel, 8x8 "
                        "with several), on, off")
    h.add_argument("--no-groups", action="store_true", help="do not outline TP groups")
    h.add_argument("--title", help="the figure title")
    h.add_argument("--dump-series", metavar="FILE",
                   help="also write what is drawn as JSON (values in the result's units)")
    h.add_argument("--out", required=True, metavar="PNG", help=OUT_HELP)


def parse_vmax(text, kind):
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([A-Za-z%]*)\s*", text or "")
    if not m:
        raise UsageError(f"--vmax {text!r}: expected a number with an optional unit")
    v, unit = num(m.group(1), f"--vmax {text!r}"), m.group(2)
    if kind == "fraction":
        if unit == "%":
            v /= 100
        elif unit:
            raise UsageError(f"--vmax {text!r}: utilization takes a fraction (0.4) or a percentage (40%)")
    elif kind == "bytes":
        sizes = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
                 "G": 1 << 30, "GiB": 1 << 30}
        if unit not in sizes:
            raise UsageError(f"--vmax {text!r}: bytes take B, KiB, MiB or GiB")
        v *= sizes[unit]
    else:
        sizes = {u: f for u, f in TIME_UNITS}
        if unit not in sizes:
            raise UsageError(f"--vmax {text!r}: a time needs a unit: ps, ns, us, ms or s")
        v *= sizes[unit]
    if v <= 0:
        raise UsageError(f"--vmax {text!r}: must be above 0")
    if not math.isfinite(v):
        raise UsageError(f"--vmax {text!r}: is not a finite number")
    return v


def colour_unit(kind, vmax):
    """(factor, unit) for the colour bar."""
    if kind == "fraction":
        return 100.0, "%"
    if kind == "bytes":
        u, f = next(((u, f) for u, f in BYTE_UNITS if vmax >= f), BYTE_UNITS[-1])
        return 1.0 / f, u
    u, f = next(((u, f) for u, f in TIME_UNITS if vmax >= f), TIME_UNITS[-1])
    return 1.0 / f, u


def grid_shape(path, data, links):
    """(rows, cols, from_config): the grid of the config's noc, whose link names must lie on
    it; without one (no config, a ring), the grid the link names span."""
    chip_cores(data, path)  # a config that is not text is refused
    cfg = data.get("config")
    rows, cols = (int(v) if v and v.isdigit() else 0
                  for v in (config_value(cfg, "noc", "rows"), config_value(cfg, "noc", "cols")))
    from_config = bool(rows and cols)
    if not from_config:
        rows = cols = 0
    for i, (a, b, _) in enumerate(links):
        for n in (a, b):
            mm = NODE_RC.match(n)
            if not mm:
                continue
            r, c = int(mm.group(1)), int(mm.group(2))
            if from_config and (r >= rows or c >= cols):
                raise UsageError(f"{path}: links[{i}].name '{a}->{b}': node {n} is outside the "
                                 f"{rows}x{cols} grid of config's noc (rows: {rows}, cols: {cols})")
            rows, cols = (rows, cols) if from_config else (max(rows, r + 1), max(cols, c + 1))
    return rows, cols, from_config


def memory_attach(cfg, rows, cols, ncores):
    """{controller node: (node it attaches to, stacked under a core)} from the resolved config's memory blocks:
    per_core memories get one channel per core (name + core id), others one per attach entry
    (name + index), as arch/chip.cc builds them."""
    out = {}
    if not isinstance(cfg, str):
        return out
    for m in re.finditer(r"(?m)^\s*memory\s*\{", cfg):
        depth, i = 1, m.end()
        while i < len(cfg) and depth:
            depth += {"{": 1, "}": -1}.get(cfg[i], 0)
            i += 1
        block = cfg[m.end():i - 1]
        name = re.search(r'\bname\s*:\s*"([^"]*)"', block)
        if not name:
            continue
        if re.search(r"\bper_core\s*:\s*true", block):
            for c in range(ncores):
                out[f"mc_{name.group(1)}{c}"] = ("r%dc%d" % (c // cols, c % cols) if rows and cols
                                                 else f"n{c}", True)
        else:
            nodes = []
            for a in re.finditer(r"\battach\s*:\s*(\[[^\]]*\]|\"[^\"]*\")", block):
                nodes += re.findall(r'"([^"]*)"', a.group(1))
            for k, node in enumerate(nodes):
                out[f"mc_{name.group(1)}{k}"] = (node, False)
    return out


def stage_groups(data, ncores):
    """Cores grouped by the layers they compute (the TP group of each pipeline stage), from
    tasks[]; [] without tasks. Cores that compute nothing are in no group."""
    tasks = data.get("tasks", [])
    if not isinstance(tasks, list):
        return []
    layers = {}
    for i, t in enumerate(tasks):
        if isinstance(t, dict) and t.get("kind") == "compute":
            c = whole(t.get("core", 0), f"tasks[{i}].core", hi=UINT32_MAX)
            layers.setdefault(c, set()).add(whole(t.get("layer", 0), f"tasks[{i}].layer", hi=UINT32_MAX))
    groups = {}
    for c, ls in layers.items():
        if c < ncores:
            groups.setdefault(tuple(sorted(ls)), []).append(c)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def panel_data(path, metric):
    data = load_result(path)
    field = METRICS[metric][0]
    links, cores, dram = data.get("links", []), data.get("cores", []), data.get("dram", [])
    for what, v in (("links", links), ("cores", cores), ("dram", dram)):
        if not isinstance(v, list):
            raise UsageError(f"{path}: {what} must be a list")
    if not links and not cores:
        raise UsageError(f"{path}: no links[] and no cores[] to draw")
    # A field proto3 JSON leaves out is 0 (an idle link or core): a missing one reads as 0.
    parsed, names, seen = [], set(), {}
    for i, l in enumerate(links):
        name = l.get("name", "") if isinstance(l, dict) else ""
        if not isinstance(name, str) or "->" not in name:
            raise UsageError(f"{path}: links[{i}].name {name!r} is not 'src->dst'")
        once(seen, name, f"{path}: links[{i}].name")
        a, b = name.split("->", 1)
        parsed.append((a, b, nonneg(l.get(field, 0), f"{path}: links[{i}].{field}")))
        names.update((a, b))
    mem, seen = {}, {}
    for i, d in enumerate(dram):
        if isinstance(d, dict) and d.get("name"):
            once(seen, d["name"], f"{path}: dram[{i}].name")
            mem["mc_" + str(d["name"])] = nonneg(d.get(field, 0), f"{path}: dram[{i}].{field}")
    rows, cols, from_config = grid_shape(path, data, parsed)
    ncores = chip_cores(data, path) if from_config or not (rows and cols) else None
    util, seen = {}, {}
    for i, c in enumerate(cores):
        if not isinstance(c, dict):
            raise UsageError(f"{path}: cores[{i}] is not an object")
        what = f"{path}: cores[{i}].core"
        if rows and cols and not from_config:
            k = whole(c.get("core", 0), what, hi=rows * cols - 1,
                      why=f" (outside the {rows}x{cols} grid the link names span; config gives no "
                          f"noc rows and cols to place it: missing, or not the resolved experiment)")
        else:
            k = whole(c.get("core", 0), what, hi=ncores - 1 if ncores else UINT32_MAX,
                      why=f" (the chip has {ncores} cores, 0..{ncores - 1})" if ncores else "")
        once(seen, k, what)
        util[k] = nonneg(c.get("utilization", 0), f"{path}: cores[{i}].utilization")
    busiest = max(parsed, key=lambda t: (t[2], t[0], t[1]), default=None)
    attach = memory_attach(data.get("config"), rows, cols, len(util))
    return {
        "attach": {k: v for k, v in attach.items() if k in mem},
        "result": path, "experiment": data.get("experiment", ""), "title": data.get("title", ""),
        "grid": [rows, cols], "links": parsed, "cores": util, "memory": mem, "names": names,
        "groups": stage_groups(data, len(util)),
        "max": max([u for _, _, u in parsed] + [0.0]),
        "busiest": busiest,
    }


def layout(p):
    """(x, y) per node: grid nodes at (col, -row); memory controllers beside their node;
    ring nodes ("n3") on a circle; anything else in a row below."""
    rows, cols = p["grid"]
    names = set(p["names"])
    core_names = {}
    for k in p["cores"]:
        core_names[k] = f"r{k // cols}c{k % cols}" if rows and cols else f"n{k}"
    names.update(core_names.values())
    names.update(p["memory"])
    pos, others = {}, []
    for n in sorted(names):
        mm = NODE_RC.match(n)
        if mm:
            pos[n] = (int(mm.group(2)), -int(mm.group(1)))
        else:
            others.append(n)
    ring = sorted((n for n in others if re.match(r"^n\d+$", n)), key=lambda n: int(n[1:]))
    if ring:
        k = max(len(ring), len(p["cores"]))
        radius = max(1.5, k / (2 * math.pi))
        for n in ring:
            a = 2 * math.pi * int(n[1:]) / k
            pos[n] = (radius * math.cos(a), radius * math.sin(a))
    # Memory controllers: beside the node their link pair joins, outside the grid when that
    # node is on its edge, else in the cell's corner (stacked memory under a core).
    attach = {mc: node for mc, (node, _) in p["attach"].items() if node in pos}
    stacked = {mc for mc, (_, st) in p["attach"].items() if st}
    for a, b, _ in p["links"]:
        if a.startswith("mc_") and b in pos:
            attach[a] = b
        elif b.startswith("mc_") and a in pos:
            attach[b] = a
    inner = set()
    for mc, node in sorted(attach.items()):
        x, y = pos[node]
        if rows and cols and NODE_RC.match(node):
            r, c = -y, x
            dx = -0.75 if c == 0 else 0.75 if c == cols - 1 else 0
            dy = 0.75 if r == 0 else -0.75 if r == rows - 1 else 0
            if dx and dy:  # a corner: keep to the longer side
                dx, dy = (dx, 0) if rows > cols else (0, dy)
            if (not dx and not dy) or mc in stacked:
                dx, dy = 0.28, 0.28
                inner.add(mc)
            pos[mc] = (x + dx, y + dy)
        else:
            pos[mc] = (x + 0.3, y + 0.3)
            inner.add(mc)
    # Several controllers on one spot (two channels on one edge router): fan them out.
    spots = {}
    for mc in sorted(attach):
        spots.setdefault(pos[mc], []).append(mc)
    for (x, y), mcs in spots.items():
        for i, mc in enumerate(mcs):
            off = (i - (len(mcs) - 1) / 2) * 0.3
            pos[mc] = (x + off, y) if abs(y - round(y)) > 0.01 or mc in inner else (x, y + off)
    rest = [n for n in others if n not in pos]
    base_y = -(rows if rows else 0) - 1 if not ring else -(max(1.5, len(ring) / (2 * math.pi))) - 1.5
    for i, n in enumerate(rest):
        pos[n] = (i - (len(rest) - 1) / 2 + (cols - 1) / 2 if cols else i, base_y)
    return pos, core_names, inner


def group_outline(cells):
    """Boundary segments of a union of unit cells centred on (col, -row)."""
    s = set(cells)
    segs = []
    for (x, y) in sorted(s):
        for dx, dy, seg in ((1, 0, ((x + .5, y - .5), (x + .5, y + .5))),
                            (-1, 0, ((x - .5, y - .5), (x - .5, y + .5))),
                            (0, 1, ((x - .5, y + .5), (x + .5, y + .5))),
                            (0, -1, ((x - .5, y - .5), (x + .5, y - .5)))):
            if (x + dx, y + dy) not in s:
                segs.append(seg)
    return segs


def draw_panel(ax, p, pos, core_names, inner, norm, cmap, core_cmap, labels, matplotlib):
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import FancyArrow, Rectangle
    rows, cols = p["grid"]
    ncores = len(p["cores"])
    span = max(rows, cols, 1) if rows and cols else max(4, math.sqrt(max(ncores, 1)) * 2)
    size = 0.5 if span <= 8 else 0.62  # bigger cores, thinner links once the grid is dense
    cells = []
    for k in sorted(p["cores"]):
        x, y = pos[core_names[k]]
        cells.append(Rectangle((x - size / 2, y - size / 2), size, size))
    ax.add_collection(PatchCollection(
        cells, facecolors=[core_cmap(p["cores"][k]) for k in sorted(p["cores"])],
        edgecolors="black", linewidths=0.8 if span <= 16 else 0.3))
    if labels:
        fs = max(4.5, min(9, 90 / span))
        for k in sorted(p["cores"]):
            x, y = pos[core_names[k]]
            ax.text(x, y, f"{k}\n{100 * p['cores'][k]:.0f}%", ha="center", va="center",
                    color="white" if p["cores"][k] > 0.6 else "black", fontsize=fs)
    grid_nodes = set(core_names.values())
    for n in sorted(set(pos) - grid_nodes - set(p["memory"]) - {a for a in pos if a.startswith("mc_")}):
        x, y = pos[n]
        ax.add_patch(Rectangle((x - size / 3, y - size / 3), 2 * size / 3, 2 * size / 3,
                               facecolor="lightgray", edgecolor="black", lw=0.5))
        ax.text(x, y - size / 2, n, ha="center", va="top", fontsize=6)
    # Links: arrows while there is room, plain segments (each on its own side) beyond 16x16.
    arrows = span <= 16
    segs, colours = [], []
    for a, b, u in sorted(p["links"], key=lambda t: (t[0], t[1])):
        (x0, y0), (x1, y1) = pos[a], pos[b]
        dx, dy = x1 - x0, y1 - y0
        d = math.hypot(dx, dy)
        if d == 0:
            continue
        ux, uy = dx / d, dy / d
        gap = size / 2 if not (a.startswith("mc_") or b.startswith("mc_")) else size / 4
        if d > 1.5 and NODE_RC.match(a) and NODE_RC.match(b):
            length = 0.35  # a wrap-around link (torus): a stub out of each end
        else:
            length = max(d - 2 * gap, 0.05)
        off = 0.08 if span <= 16 else 0.12
        sx, sy = x0 + ux * gap + uy * off, y0 + uy * gap - ux * off
        colour = cmap(norm(u))
        if arrows:
            ax.add_patch(FancyArrow(sx, sy, ux * length, uy * length, width=0.06, head_width=0.12,
                                    head_length=0.08, length_includes_head=True, color=colour, lw=0))
        else:
            segs.append(((sx, sy), (sx + ux * length, sy + uy * length)))
            colours.append(colour)
    if segs:
        ax.add_collection(LineCollection(segs, colors=colours, linewidths=max(0.8, 32 / span),
                                         capstyle="butt"))
    # Memory controllers, outlined in blue.
    for mc in sorted(m for m in pos if m.startswith("mc_")):
        x, y = pos[mc]
        s = 0.16 if mc in inner else 0.36
        ax.add_patch(Rectangle((x - s / 2, y - s / 2), s, s, facecolor="white",
                               edgecolor="tab:blue", lw=1.2 if span <= 16 else 0.6, zorder=3))
        if labels and mc not in inner and span <= 16:
            ax.text(x, y - s / 2 - 0.03, mc[3:], ha="center", va="top", fontsize=5, color="tab:blue")
    # TP groups.
    if p["groups"] and rows and cols and len(p["groups"]) > 0:
        gcols = matplotlib.colormaps["tab10"].colors
        for i, g in enumerate(p["groups"]):
            segs = group_outline([pos[core_names[c]] for c in g if c in core_names])
            ax.add_collection(LineCollection(segs, colors=[gcols[i % 10]], linewidths=2.2, zorder=4))
            x, y = min(pos[core_names[c]] for c in g)
            if len(p["groups"]) > 1 and span <= 32:
                ax.text(x - 0.45, max(pos[core_names[c]][1] for c in g) + 0.45, f"TP group {i}",
                        fontsize=6 if span > 16 else 7, color=gcols[i % 10], va="bottom", zorder=5)
    xs = [q[0] for q in pos.values()] or [0]
    ys = [q[1] for q in pos.values()] or [0]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def cmd_heatmap(args):
    metric = args.metric
    field, bar_label, kind = METRICS[metric]
    panels = [panel_data(p, metric) for p in args.results]
    vmax = parse_vmax(args.vmax, kind) if args.vmax else max(p["max"] for p in panels)
    if vmax <= 0:
        vmax = 1.0
    factor, unit = colour_unit(kind, vmax)

    matplotlib, plt = plt_module()
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(10 if n == 1 else 1 + 7.5 * n, 8), dpi=DPI,
                             squeeze=False)
    cmap = plt.get_cmap("inferno_r")
    core_cmap = plt.get_cmap("Greens")
    norm = matplotlib.colors.Normalize(0, vmax, clip=True)
    dump = {"metric": metric, "field": field, "vmax": vmax, "unit": unit, "factor": factor,
            "panels": []}
    for i, p in enumerate(panels):
        ax = axes[0][i]
        if args.no_groups:
            p["groups"] = []
        rows, cols = p["grid"]
        span = max(rows, cols, 1)
        labels = {"on": True, "off": False}.get(args.labels, span <= (12 if n == 1 else 8))
        pos, core_names, inner = layout(p)
        draw_panel(ax, p, pos, core_names, inner, norm, cmap, lambda u: core_cmap(min(max(u, 0), 1)),
                   labels, matplotlib)
        b = p["busiest"]
        sub = p["experiment"] or p["result"]
        if p["title"]:
            sub += "\n" + p["title"]
        if b:
            sub += f"\nbusiest link {b[0]}->{b[1]}: {b[2] * factor:.3g} {unit}"
        if p["memory"]:
            mc, v = max(p["memory"].items(), key=lambda kv: (kv[1], kv[0]))
            sub += f"; busiest memory channel {mc[3:]}: {v * factor:.3g} {unit}"
        ax.set_title(sub, fontsize=9)
        dump["panels"].append({
            "result": p["result"], "experiment": p["experiment"], "title": p["title"], "grid": p["grid"],
            "links": {f"{a}->{b2}": v for a, b2, v in sorted(p["links"])},
            "memory": dict(sorted(p["memory"].items())),
            "cores": {str(k): v for k, v in sorted(p["cores"].items())},
            "groups": p["groups"],
            "busiest": f"{b[0]}->{b[1]}" if b else None, "max": p["max"],
        })
    scale_note = ("scale shared by all panels" if n > 1 else "scale up to the busiest link") \
        if not args.vmax else "scale set by --vmax, clipped above"
    fig.colorbar(matplotlib.cm.ScalarMappable(
        norm=matplotlib.colors.Normalize(0, vmax * factor), cmap=cmap), ax=list(axes[0]),
        fraction=0.04 if n == 1 else 0.02, pad=0.02, label=f"{bar_label} ({unit}); {scale_note}")
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=matplotlib.colors.Normalize(0, 100), cmap=core_cmap),
                 ax=list(axes[0]), orientation="horizontal", fraction=0.04, pad=0.03,
                 label="core busy fraction (%)" + ("; outlines: TP groups" if any(
                     d["groups"] for d in dump["panels"]) else ""))
    fig.suptitle(args.title or f"links by {metric}" + (", one scale" if n > 1 else ""), fontsize=11)
    dump_json(args.dump_series, dump)
    save(fig, args.out)
