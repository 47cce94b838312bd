"""`tpsim plot front`: the Pareto fronts of one or more `tpsim search --db` stores."""

import sqlite3

from plot_common import (DPI, FIGSIZE, OUT_HELP, UINT32_MAX, UsageError, check_input, dump_json, nonneg,
                         plt_module, save, whole)

HELP = """The points of one or more search stores (tpsim search ... --db S.sqlite), one colour
per store: total latency (x, ms) against energy per token (y, mJ), every simulated candidate
as a faint dot and the Pareto front of the two (lower is better on both) as a line. The
front's fastest and most frugal points are labelled tp x stages x replicas. Give a label per
store as S.sqlite:LABEL (default: the file name). Rows without energy are refused: a chip
without an energy block (or an fp32 workload that meets no mac_fp32_pj), and the points of a
search of a request stream (workload.requests: a served stream reports no energy).
Energy per token is the chip's running all of a candidate's replicas, as tpsim search prints
it: each replica's dynamic energy, and the chip's static energy (static_energy_j, which the
one-replica run is charged whole) shared by all replicas' tokens. A store written before
static_energy_j was kept (2026-12-06) cannot give that for a candidate of several replicas:
its rows are refused; search again into a new store.
"""

COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]


def add_arguments(p):
    p.add_argument("stores", nargs="+", metavar="S.sqlite[:LABEL]")
    p.add_argument("--out", required=True, metavar="PNG", help=OUT_HELP)
    p.add_argument("--title", default="")
    p.add_argument("--dump-series", metavar="FILE", help="also write what was drawn as JSON")


def read_store(path):
    try:
        check_input(path)
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        cols = [r[1] for r in con.execute("PRAGMA table_info(points)")]
        need = ["mapping.tp", "mapping.pipeline_stages", "search.replicas", "total_ps", "energy_per_token_j"]
        missing = [c for c in need if c not in cols]
        if missing:
            raise UsageError(f"{path}: not a tpsim search store (no column(s) {', '.join(missing)})")
        # A served request stream's point fills the serving columns (latency_p99_ms), not total_ps.
        served = "latency_p99_ms IS NOT NULL" if "latency_p99_ms" in cols else "0"
        energy_j, static = (c if c in cols else "NULL" for c in ("energy_j", "static_energy_j"))
        rows = con.execute('SELECT "mapping.tp", "mapping.pipeline_stages", "search.replicas", total_ps, '
                           f"energy_per_token_j, {served}, {energy_j}, {static} FROM points WHERE status = 'ok' "
                           "ORDER BY point_index").fetchall()
        con.close()
    except sqlite3.Error as e:
        raise UsageError(f"{path}: cannot read the points table: {e}")
    if not rows:
        raise UsageError(f"{path}: no simulated point (status ok)")
    out = []
    for i, (tp, st, rep, total, energy, is_served, energy_j, static_j) in enumerate(rows):
        if energy is None and is_served:
            raise UsageError(f"{path}: row {i}: no energy per token: the store's points serve a request "
                             "stream (workload.requests), and a served stream reports no energy; the front "
                             "plot draws the points of a search without one")
        if energy is None:
            raise UsageError(f"{path}: row {i}: no energy per token (the chip has no energy block, or an "
                             "fp32 workload meets no mac_fp32_pj)")
        at = f"{path}: row {i}: "
        replicas = whole(rep, at + "search.replicas", lo=1, hi=UINT32_MAX)
        mj = nonneg(energy, at + "energy_per_token_j") * 1e3
        if replicas > 1:
            # The chip's energy per token with every replica running (tpsim search's column,
            # sim/search/search.cc ChipEnergyPerToken): the run's static energy shared by all.
            if static_j is None or energy_j is None:
                raise UsageError(f"{path}: row {i}: no static_energy_j: the store was written before it was "
                                 f"kept (2026-12-06), so the energy per token of {replicas} replicas sharing the "
                                 "chip cannot be derived; search again into a new store")
            total_j = nonneg(energy_j, at + "energy_j")
            if total_j == 0:
                raise UsageError(f"{at}energy_j: 0 with energy_per_token_j {energy}: the static share "
                                 f"of {replicas} replicas cannot be derived")
            mj *= 1 - nonneg(static_j, at + "static_energy_j") / total_j * (1 - 1 / replicas)
        out.append({"label": f"{whole(tp, at + 'mapping.tp', hi=UINT32_MAX)}x"
                             f"{whole(st, at + 'mapping.pipeline_stages', hi=UINT32_MAX)}x{replicas}",
                    "ms": nonneg(total, at + "total_ps") * 1e-9, "mj": mj})
    return out


def front(points):
    """Points no other beats on both (lower latency, lower energy), by latency."""
    best = []
    for p in sorted(points, key=lambda p: (p["ms"], p["mj"])):
        if not best or p["mj"] < best[-1]["mj"]:
            best.append(p)
    return best


def cmd_front(args):
    stores = []
    for spec in args.stores:
        path, _, label = spec.partition(":")
        pts = read_store(path)
        stores.append({"label": label or path, "points": pts, "front": front(pts)})
    matplotlib, plt = plt_module()
    fig = plt.figure(figsize=FIGSIZE, dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    for k, s in enumerate(stores):
        c = COLOURS[k % len(COLOURS)]
        ax.scatter([p["ms"] for p in s["points"]], [p["mj"] for p in s["points"]], s=10, color=c, alpha=0.25)
        f = s["front"]
        ax.plot([p["ms"] for p in f], [p["mj"] for p in f], "-o", color=c, ms=5,
                label=f"{s['label']}: front of {len(s['points'])} points")
        for p in {id(f[0]): f[0], id(f[-1]): f[-1]}.values():
            ax.annotate(p["label"], (p["ms"], p["mj"]), textcoords="offset points", xytext=(4, 4), fontsize=8,
                        color=c)
    ax.set_xlabel("total latency (ms)")
    ax.set_ylabel("energy per token (mJ)")
    ax.set_title(args.title or "search fronts: latency against energy per token (labels: tp x stages x replicas)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    save(fig, args.out)
    dump_json(args.dump_series, {"stores": [{"label": s["label"], "points": len(s["points"]),
                                             "front": [[p["label"], p["ms"], p["mj"]] for p in s["front"]]}
                                            for s in stores]})
