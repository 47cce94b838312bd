"""`tpsim plot sweep`: a metric of a sweep store against one swept field.

Rows are the points with status ok that pass --where. Every swept field (a column named by
a field path, and `engine` when the store holds several) must be either plotted (--x,
--color, --facet) or held at one value; otherwise the points of different configurations
would join into one line, so the command stops with exit 2 and names the field and its
values.
"""

import math
import os
import sqlite3
import sys

from plot_common import (DPI, FIGSIZE, UsageError, axis_unit, check_input, dump_json, finite,
                         fmt_value, metric, plt_module, save, value_key, write_stdout, OUT_HELP)
from plot_where import Where

# Columns every store has that are neither swept fields nor metrics.
FIXED = ("config_hash", "point_index", "status", "engine", "wall_ms", "error", "config")
HELP = __doc__


def add_arguments(s):
    s.add_argument("db", metavar="RESULTS.sqlite", help="a sweep store (tpsim sweep --db)")
    s.add_argument("--x", required=True, metavar="FIELD",
                   help="swept field on the x axis (e.g. workload.seq_len); numbers are drawn "
                        "on a numeric axis, text as categories")
    s.add_argument("--y", required=True, metavar="METRIC",
                   help="metric column on the y axis (total_ps, prefill_ps, core_utilization, ...); "
                        "drawn in the unit its name states, scaled (ps -> us/ms/s, bytes -> KiB/MiB/GiB)")
    s.add_argument("--color", "--group", dest="color", metavar="FIELD",
                   help="one line per value of FIELD (--group is the old name)")
    s.add_argument("--facet", metavar="FIELD",
                   help="one panel per value of FIELD (panels share the x axis; the y axis only with "
                        "--sharey or --ratio, else each panel is scaled to its own points)")
    s.add_argument("--where", metavar="EXPR",
                   help="keep only the rows where EXPR holds; the syntax of a sweep's require: "
                        "'workload.seq_len >= 512 && mapping.partition != \"mn_2d\"'")
    s.add_argument("--logx", action="store_true",
                   help="logarithmic x axis (base 2 when every x is a power of 2); without it a "
                        "numeric x spanning 16x or more gets a log2 axis anyway")
    s.add_argument("--logy", action="store_true", help="logarithmic y axis")
    s.add_argument("--ratio", metavar="A/B",
                   help="draw METRIC(A) / METRIC(B) for two values A and B of the --color field "
                        "(one line per panel, a line at 1; e.g. k_split/m_split_rotate)")
    s.add_argument("--hline", action="append", default=[], metavar="Y[:LABEL]",
                   help="a horizontal dashed line at Y, in the store's unit of the --y metric (e.g. "
                        "ms for ttft_p99_ms); Y may name a swept field held at one value, e.g. "
                        "--hline workload.requests.slo_ttft_ms:SLO draws the SLO line (repeatable)")
    s.add_argument("--sharey", action="store_true",
                   help="panels share one y scale (always with --ratio)")
    s.add_argument("--title", help="the figure title (default: what is drawn and what is held fixed)")
    s.add_argument("--table", action="store_true",
                   help="also print the drawn series as a table on stdout")
    s.add_argument("--dump-series", metavar="FILE",
                   help="also write the drawn series as JSON (values in the store's units)")
    s.add_argument("--out", required=True, metavar="PNG", help=OUT_HELP)


def read_store(path):
    if not os.path.exists(path):
        raise UsageError(f"cannot read {path}: no such file")
    try:
        check_input(path)
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        cols = [r[1] for r in con.execute("PRAGMA table_info(points)")]
        if not cols:
            raise UsageError(f"{path}: no table 'points' (not a tpsim sweep store)")
        q = ", ".join('"' + c.replace('"', '""') + '"' for c in cols)
        rows = [dict(zip(cols, r)) for r in con.execute(f"SELECT {q} FROM points ORDER BY rowid")]
    except sqlite3.Error as e:
        raise UsageError(f"{path}: {e}")
    finally:
        try:
            con.close()
        except NameError:
            pass
    return cols, rows


def is_field(c):
    """Swept fields are named by their path: chip.*, model.*, workload.*, mapping.*, name, ..."""
    return "." in c or c in ("name", "description")


def values_text(vals, limit=8):
    vs = [fmt_value(v) for v in sorted(vals, key=value_key)]
    return ", ".join(vs[:limit]) + (f", ... ({len(vs)} in all)" if len(vs) > limit else "")


def series_data(args):
    """Reads, filters and groups the store; returns the dict --dump-series writes."""
    cols, rows = read_store(args.db)
    fields = [c for c in cols if is_field(c)]
    metrics = [c for c in cols if c not in FIXED and not is_field(c)]
    for flag, c in (("--x", args.x), ("--color", args.color), ("--facet", args.facet)):
        if c is not None and c not in cols:
            raise UsageError(f"{flag} {c}: no column '{c}' in points (swept fields: "
                             f"{', '.join(fields) or 'none'})")
    if args.y not in cols:
        raise UsageError(f"--y {args.y}: no column '{args.y}' in points (metrics: {', '.join(metrics)})")
    # A column that is no metric (config, error, status) put a whole config in the message.
    if args.y not in metrics:
        raise UsageError(f"--y {args.y}: not a metric of the points (metrics: {', '.join(metrics)})")
    used = [c for c in (args.x, args.color, args.facet) if c]
    if len(set(used)) != len(used):
        raise UsageError("--x, --color and --facet must name different fields")
    if args.ratio and not args.color:
        raise UsageError("--ratio A/B compares two values of the --color field: give --color")
    if not rows:
        raise UsageError(f"{args.db}: table points is empty")

    where = Where(args.where, cols) if args.where else None
    kept, skipped = [], {}
    for r in rows:
        if "status" in r and r["status"] != "ok" and not (where and "status" in where.fields):
            skipped[r["status"]] = skipped.get(r["status"], 0) + 1
            continue
        if where and not where.holds(r):
            continue
        kept.append(r)
    if skipped:
        print("tpsim plot: left out " + ", ".join(f"{n} {s}" for s, n in sorted(skipped.items())) +
              " point(s) (only status ok is drawn)", file=sys.stderr)
    if not kept:
        why = f" pass --where {args.where!r}" if where else " have status ok"
        first = next((r.get("error") for r in rows if r.get("error")), None)
        raise UsageError(f"{args.db}: no point of {len(rows)} left to draw: none" + why +
                         (f" (first error: {first.splitlines()[0][:160]})" if first and not where else ""))

    # Every swept field not drawn must hold one value.
    axes = fields + (["engine"] if "engine" in cols else [])
    for f in axes:
        if f in used:
            continue
        vals = {r.get(f) for r in kept}
        if len(vals) > 1:
            v0 = sorted(vals, key=value_key)[0]
            lit = f'"{v0}"' if isinstance(v0, str) else fmt_value(v0)
            raise UsageError(
                f"swept field {f} has {len(vals)} values ({values_text(vals)}) but is not drawn: "
                f"give --color {f} or --facet {f}, or hold it with --where '{f} == {lit}'")
    fixed = {f: kept[0].get(f) for f in fields if f not in used}

    numeric_x = all(isinstance(r[args.x], (int, float)) for r in kept if r[args.x] is not None)
    ratio = None
    if args.ratio:
        if args.ratio.count("/") != 1 or "" in args.ratio.split("/"):
            raise UsageError(f"--ratio {args.ratio!r}: expected A/B, two values of --color {args.color}")
        ratio = args.ratio.split("/")
        if ratio[0] == ratio[1]:
            raise UsageError(f"--ratio {args.ratio}: A and B are the same value (every ratio would be 1)")
        present = {fmt_value(r[args.color]) for r in kept}
        for v in ratio:
            if v not in present:
                raise UsageError(f"--ratio {args.ratio}: {v!r} is not a value of --color {args.color} "
                                 f"(values: {values_text({r[args.color] for r in kept})})")

    panels = {}
    row_of = {id(r): k + 1 for k, r in enumerate(rows)}
    for r in kept:
        x, y = r[args.x], r[args.y]
        if x is None or y is None:
            continue
        if not isinstance(y, (int, float)):
            raise UsageError(f"--y {args.y}: value {y!r} is not a number")
        point = f"point {r['point_index']}" if "point_index" in r else f"row {row_of[id(r)]}"
        metric(y, args.y, f"{args.db}: {point}: {args.y}")
        if isinstance(x, float):
            finite(x, f"{args.db}: {point}: {args.x}")
        fv = r[args.facet] if args.facet else None
        cv = r[args.color] if args.color else None
        pts = panels.setdefault(fmt_value(fv) if args.facet else None, {}).setdefault(
            fmt_value(cv) if args.color else None, {})
        key = x if numeric_x else fmt_value(x)
        if key in pts:
            where_txt = ", ".join(f"{f} = {fmt_value(r[f])}" for f in used)
            raise UsageError(f"two points at {where_txt}: the store holds several runs of one point "
                             f"(merged stores of different sweeps?); select one with --where")
        pts[key] = y
    if not panels:
        raise UsageError(f"{args.db}: no row with both {args.x} and {args.y}")

    out_panels = []
    for pv in sorted(panels, key=lambda v: value_key(v) if v is not None else (0, 0, "")):
        lines = panels[pv]
        series = []
        if ratio:
            a, b = lines.get(ratio[0], {}), lines.get(ratio[1], {})
            xs = sorted((k for k in a if k in b and b[k]), key=value_key)
            series.append({"label": f"{ratio[0]} / {ratio[1]}", "color": None,
                           "x": xs, "y": [a[k] / b[k] for k in xs]})
        else:
            for cv in sorted(lines, key=lambda v: value_key(v) if v is not None else (0, 0, "")):
                xs = sorted(lines[cv], key=value_key)
                series.append({"label": f"{args.color} = {cv}" if args.color else args.y,
                               "color": cv, "x": xs, "y": [lines[cv][k] for k in xs]})
        out_panels.append({"facet": pv, "series": series})
    if ratio and not any(s["x"] for p in out_panels for s in p["series"]):
        raise UsageError(f"--ratio {args.ratio}: no x where both {ratio[0]} and {ratio[1]} have a value")
    return {"x": args.x, "y": args.y, "color": args.color, "facet": args.facet,
            "ratio": args.ratio, "where": args.where, "fixed": {k: fixed[k] for k in sorted(fixed)},
            "numeric_x": numeric_x, "points": len(kept), "panels": out_panels}


def pow2(v):
    return v > 0 and float(v).is_integer() and (int(v) & (int(v) - 1)) == 0


def cmd_sweep(args):
    data = series_data(args)
    all_y = [y for p in data["panels"] for s in p["series"] for y in s["y"]]
    if data["ratio"]:
        yscale, ylabel = 1.0, f"{args.y}: {data['ratio'].replace('/', ' / ')} (ratio)"
    else:
        yscale, ylabel = axis_unit(args.y, all_y)
    xs_all = sorted({x for p in data["panels"] for s in p["series"] for x in s["x"]}, key=value_key)
    xscale, xlabel = axis_unit(args.x, xs_all) if data["numeric_x"] else (1.0, args.x)
    numeric_x = data["numeric_x"]
    logx = None
    if numeric_x and xs_all and xs_all[0] > 0:
        if args.logx or xs_all[-1] / xs_all[0] >= 16:
            logx = 2 if all(pow2(x) for x in xs_all) else 10
    elif args.logx and numeric_x:
        raise UsageError(f"--logx: {args.x} has values <= 0")
    if args.logy and any(y <= 0 for y in all_y):
        raise UsageError(f"--logy: {args.y} has values <= 0")
    hlines = []
    for h in args.hline:
        spec, _, label = h.partition(":")
        if spec in data["fixed"]:
            value = data["fixed"][spec]
            label = label or f"{spec} = {fmt_value(value)}"
        else:
            try:
                value = float(spec)
            except ValueError:
                raise UsageError(f"--hline {h}: '{spec}' is neither a number nor a swept field held at "
                                 f"one value ({', '.join(sorted(data['fixed'])) or 'none'})")
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UsageError(f"--hline {h}: {spec} is not a finite number")
        hlines.append({"y": float(value), "label": label or fmt_value(value)})
    data.update({"xlabel": xlabel, "ylabel": ylabel, "x_factor": xscale, "y_factor": yscale,
                 "logx": logx, "logy": bool(args.logy), "hlines": hlines})

    matplotlib, plt = plt_module()
    n = len(data["panels"])
    ncols = n if n <= 3 else math.ceil(math.sqrt(n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=FIGSIZE, dpi=DPI, squeeze=False,
                             sharex=True, sharey=bool(args.sharey or args.ratio))
    legend_rect = (0, 0, 1, 1)
    colours = {}
    palette = plt.get_cmap("tab10").colors
    for p in data["panels"]:
        for s in p["series"]:
            if s["color"] is not None and s["color"] not in colours:
                colours[s["color"]] = None
    for i, c in enumerate(sorted(colours, key=value_key)):
        colours[c] = palette[i % len(palette)]
    xcat = {x: i for i, x in enumerate(xs_all)} if not numeric_x else None
    small = sum(len(s["x"]) for s in data["panels"][0]["series"]) <= 12
    for i, p in enumerate(data["panels"]):
        ax = axes[i // ncols][i % ncols]
        for s in p["series"]:
            xv = [x * xscale for x in s["x"]] if numeric_x else [xcat[x] for x in s["x"]]
            yv = [y * yscale for y in s["y"]]
            ax.plot(xv, yv, marker="o", ms=4, color=colours.get(s["color"], "tab:blue"),
                    label=s["label"] if args.color and not data["ratio"] else None)
            if data["ratio"] and small:
                for xx, yy in zip(xv, yv):
                    ax.annotate(f"{yy:.2f}", (xx, yy), textcoords="offset points", xytext=(0, 5),
                                ha="center", fontsize=7)
        if data["ratio"]:
            ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        for h in hlines:
            ax.axhline(h["y"] * yscale, color="tab:red", lw=1.0, ls="--", label=h["label"])
        if args.facet:
            ax.set_title(f"{args.facet} = {p['facet']}", fontsize=9)
        ax.grid(True, alpha=0.3)
        if logx:
            ax.set_xscale("log", base=logx)
        if args.logy:
            ax.set_yscale("log")
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    ax0 = axes[0][0]
    if numeric_x:
        if len(xs_all) <= 12:
            ax0.set_xticks([x * xscale for x in xs_all])
            ax0.set_xticklabels([fmt_value(x * xscale) for x in xs_all])
            ax0.minorticks_off()
    else:
        ax0.set_xticks(range(len(xs_all)))
        ax0.set_xticklabels([str(x) for x in xs_all], rotation=30, ha="right")
    for a in axes.flat:
        a.tick_params(axis="x", labelsize=8)
    for r in range(nrows):
        axes[r][0].set_ylabel(ylabel, fontsize=9)
    for c in range(ncols):
        bottom = max(r for r in range(nrows) if r * ncols + c < n) if c < n else 0
        axes[bottom][c].set_xlabel(xlabel, fontsize=9)
        axes[bottom][c].xaxis.set_tick_params(labelbottom=True)
    if args.color and not data["ratio"]:
        seen = {}
        hline_labels = {x["label"] for x in hlines}
        for p_ax in axes.flat:
            for h, l in zip(*p_ax.get_legend_handles_labels()):
                if l not in hline_labels:
                    seen.setdefault(l, h)
        order = sorted(seen, key=lambda l: value_key(l.split(" = ", 1)[1]))
        handles = [seen[l] for l in order]
        extra = [(h, l) for h, l in zip(*ax0.get_legend_handles_labels()) if l in hline_labels]
        handles += [h for h, _ in extra]
        order += [l for _, l in extra]
        if n == 1:
            ax0.legend(handles, order, fontsize=8)
        elif nrows * ncols > n:  # an empty panel holds the legend
            axes[-1][-1].legend(handles, order, fontsize=9, loc="center")
        else:
            fig.legend(handles, order, fontsize=8, loc="lower center", ncol=min(4, len(order)))
            legend_rect = (0, 0.04, 1, 1)
    title = args.title
    if not title:
        stem = ylabel.split(" (")[0] if not data["ratio"] else f"{args.y} ratio {data['ratio']}"
        title = f"{stem} vs {args.x}"
        if args.color and not data["ratio"]:
            title += f" by {args.color}"
        if data["ratio"]:
            title += f" (below 1: {data['ratio'].split('/')[0]} is lower)"
        held = [f"{f} = {fmt_value(v)}" for f, v in data["fixed"].items()]
        if args.where:
            held.append(f"where {args.where}")
        if held:
            title += "\n" + "; ".join(held)
    if hlines and not (args.color and not data["ratio"]):
        ax0.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=legend_rect)
    if args.table:
        print_table(data)
    dump_json(args.dump_series, data)
    save(fig, args.out)


def print_table(data):
    """The drawn values (in the axis' unit), one block per panel: a row per x, a column per line."""
    out = []  # written at once by write_stdout: a failed write is exit 1, not a lost table
    out.append(f"# {data['ylabel']} by {data['x']}" + (f"; where {data['where']}" if data["where"] else ""))
    for p in data["panels"]:
        if data["facet"]:
            out.append(f"# {data['facet']} = {p['facet']}")
        xs = sorted({x for s in p["series"] for x in s["x"]}, key=value_key)
        head = [data["x"]] + [s["label"] for s in p["series"]]
        width = [max(10, len(h)) for h in head]
        out.append("  ".join(h.rjust(w) for h, w in zip(head, width)))
        for x in xs:
            cells = [fmt_value(x)]
            for s in p["series"]:
                v = dict(zip(s["x"], s["y"])).get(x)
                cells.append("-" if v is None else (f"{v:.3f}" if data["ratio"] else f"{v * data['y_factor']:.4g}"))
            out.append("  ".join(c.rjust(w) for c, w in zip(cells, width)))
    write_stdout("".join(line + "\n" for line in out))
