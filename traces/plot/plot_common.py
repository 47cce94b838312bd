"""Helpers shared by tpsim's plot commands: errors, matplotlib set-up, input reading, units."""

import json
import math
import os
import re
import stat
import sys
import tempfile

FIGSIZE = (10, 8)
DPI = 100


class UsageError(Exception):
    """Bad input or usage: `tpsim plot` prints it on one line and exits 2."""


class WriteError(Exception):
    """An output could not be written: `tpsim plot` prints it on one line and exits 1, as
    tpsim's other commands do."""


# The picture formats `--out` takes, by extension, with the metadata that keeps their bytes the
# same from run to run: matplotlib stamps PNGs with its version (Software), SVGs with the date
# (Date) and PDFs with the time (CreationDate); each backend accepts only its own keys (the SVG
# writer refused the PNG's Software with a ValueError). PostScript, EPS, JPEG, TIFF and WebP are
# left out: the first two embed the time and the file's name, the others take no metadata.
FORMATS = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
OUT_HELP = "the picture to write: .png, .svg or .pdf by its extension (none: PNG)"


def plt_module():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "tpsim"
    return matplotlib, plt


def out_path(path):
    """The file `--out PATH` writes: PATH; without an extension PATH.png, the name matplotlib
    gave it, unless PATH is a device, FIFO or folder (/dev/null gets the PNG; a folder, the
    error that says so)."""
    if os.path.splitext(path)[1][1:]:
        return path
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return path
    except OSError:
        pass
    return path.rstrip(".") + ".png"


def out_format(path):
    """The format of the picture `path` (an out_path): its extension, .png, .svg or .pdf in
    any case (none: a device, PNG); another is refused (exit 2)."""
    ext = os.path.splitext(path)[1][1:]
    if not ext:
        return "png"
    if ext.lower() not in FORMATS:
        raise UsageError(f"--out {path}: .{ext} is not a picture format tpsim plot writes; "
                         f"name a .png, .svg or .pdf file")
    return ext.lower()


def same_file(a, b):
    """Whether paths a and b name one file: the same inode when both exist (links, ./, ..),
    else the same absolute path with links resolved (as configs/files.cc SameFile)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(os.path.abspath(a)) == os.path.realpath(os.path.abspath(b))


def check_outputs(outputs, inputs):
    """Refuses (exit 2) an output that names an input, which it would overwrite, or two
    outputs that name one file. outputs: [(flag, path or None)]."""
    for i, (flag, out) in enumerate(outputs):
        if not out:
            continue
        for path in inputs:
            if path and same_file(out, path):
                raise UsageError(f"{flag} {out}: names an input of this command ({path}); "
                                 f"write the output elsewhere")
        for other_flag, other in outputs[:i]:
            if other and same_file(out, other):
                raise UsageError(f"{flag} {out}: names the same file as {other_flag}; "
                                 f"give each output its own file")


def _strerror(e):
    return e.strerror or str(e)


def write_output(path, write):
    """Calls write(f) with a binary file for `path`. A regular file is written to a temporary
    file in its folder and renamed over it, so a failed write leaves no partial file (and the
    old file, if any, as it was); a device or FIFO (/dev/null, /dev/stdout) is written in place,
    as configs::OutputFile does. Raises WriteError naming the file and the reason."""
    def fail(why):
        return WriteError(f"cannot write {path}: {why}")

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise fail(_strerror(e))
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise fail("is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CLOEXEC), "wb") as f:
                write(f)
        except OSError as e:
            raise fail(_strerror(e))
        return
    folder = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tpsim-tmp-", dir=folder)
    except OSError as e:
        raise fail(f"cannot create a temporary file in {folder} ({_strerror(e)})")
    try:
        with os.fdopen(fd, "wb") as f:
            if st is not None:
                mode = st.st_mode & 0o7777
            else:
                mask = os.umask(0)
                os.umask(mask)
                mode = 0o666 & ~mask
            os.fchmod(f.fileno(), mode)
            write(f)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise fail(_strerror(e))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def save(fig, out):
    """Writes the figure to `out` (see out_path) at DPI, the same bytes for the same input."""
    out = out_path(out)
    fmt = out_format(out)
    write_output(out, lambda f: fig.savefig(f, format=fmt, dpi=DPI, metadata=FORMATS[fmt]))


def dump_json(path, data):
    """Writes what a plot drew (--dump-series) as sorted, indented JSON."""
    if not path:
        return
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    write_output(path, lambda f: f.write(text.encode("utf-8")))


def check_input(path):
    """An input must be a regular file: a FIFO would block and /dev/zero never ends (reading
    it grew memory until the process was killed); as tpsim's config reader says it."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: is not a regular file (a FIFO, device or socket)")


class _NonFinite:
    """A JSON number that is not finite (NaN, Infinity, -Infinity, 1e400), as written."""

    def __init__(self, text):
        self.text = text


class _Repeated(dict):
    """A JSON object that named a key twice (json keeps the last one, silently)."""
    repeated = None


def _parse_float(text):
    v = float(text)
    return v if math.isfinite(v) else _NonFinite(text)


def _object(pairs):
    d = _Repeated()
    for k, v in pairs:
        if k in d and d.repeated is None:
            d.repeated = k
        d[k] = v
    return d if d.repeated is not None else dict(d)


def load_json(path):
    """The JSON value in file `path`. Refused (exit 2), naming the file and the JSON path: a
    number that is not finite (JSON has none; Python's reader took NaN and Infinity) and an
    object that names a key twice (the last one won)."""
    check_input(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f, parse_constant=_NonFinite, parse_float=_parse_float,
                             object_pairs_hook=_object)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except RecursionError:
        raise UsageError(f"{path}: arrays or objects nested too deeply to read (a tpsim result "
                         f"nests a few levels)")
    except ValueError as e:
        raise UsageError(f"{path}: not JSON: {e}")
    stack = [(data, "")]  # a walk without recursion: the reader took any depth it could
    while stack:
        v, at = stack.pop()
        if isinstance(v, _NonFinite):
            raise UsageError(f"{path}: {at or 'the top level'}: {v.text} is not a finite number "
                             f"(JSON has no NaN or Infinity; tpsim writes finite numbers)")
        if isinstance(v, _Repeated):
            raise UsageError(f"{path}: {at or 'the top-level object'}: key {v.repeated!r} appears "
                             f"twice (each key once: which one would count?)")
        if isinstance(v, dict):
            stack += [(x, f"{at}.{k}" if at else k) for k, x in reversed(v.items())]
        elif isinstance(v, list):
            stack += [(x, f"{at}[{i}]") for i, x in reversed(list(enumerate(v)))]
    return data


def load_result(path):
    data = load_json(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a tpsim result (expected a JSON object)")
    return data


def _shown(v):
    """v as the input wrote it: JSON's true/null, a CSV or JSON string quoted."""
    return json.dumps(v) if isinstance(v, bool) or v is None else repr(v)


def finite(v, what):
    """v (a parsed number) when finite; else refused, naming `what` (an option or a field)."""
    if not math.isfinite(v):
        raise UsageError(f"{what}: {_shown(v)} is not a finite number")
    return v


NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def num(v, what):
    """A finite number: a JSON number, or a string of ASCII decimal digits with an optional
    sign, point and exponent (proto3 JSON writes int64 as strings; CSV cells are strings).
    Python's float() also took true, "1_000", "nan", " 5 " and other scripts' digits.
    `what` names the file and the field (JSON path, or CSV FILE:ROW:COLUMN)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise UsageError(f"{what}: {_shown(v)} is not a number")
    if isinstance(v, str) and not NUMBER.fullmatch(v):
        raise UsageError(f"{what}: {_shown(v)} is not a number (ASCII digits with an optional "
                         f"sign, point and exponent)")
    try:
        x = float(v)
    except OverflowError:  # an integer beyond a double
        x = math.inf
    if not math.isfinite(x):
        raise UsageError(f"{what}: {_shown(v)} is not a finite number")
    return x


def nonneg(v, what):
    """num(v) for a quantity that cannot be below 0: a time, size, count, energy or share."""
    x = num(v, what)
    if x < 0:
        raise UsageError(f"{what}: {_shown(v)} is negative (a time, size, energy or "
                         f"utilisation is 0 or more)")
    return x


# tpsim's clock: int64 picoseconds.
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1


def duration(v, what, unit="ps"):
    """nonneg(v) for a time in `unit` (ps or ms), at most the 2^63 - 1 ps tpsim's clock holds."""
    x = nonneg(v, what)
    size = {"ps": 1.0, "ms": 1e9}[unit]
    if x * size > INT64_MAX:
        raise UsageError(f"{what}: {_shown(v)} is above {INT64_MAX / size:.4g} {unit}, the longest "
                         f"time tpsim's clock holds (2^63 - 1 ps)")
    return x


# Metrics whose unit (the end of their name, before a _mean or _p99) cannot be negative.
UNSIGNED = ("_ps", "_ns", "_us", "_ms", "_s", "_bytes", "_j", "_pj", "_w", "_tokens", "_cycles",
            "utilization")


def metric(v, name, what):
    """num(v) for the metric `name` of a store; nonneg(v) when its unit is a time, size,
    energy, power, count or utilisation."""
    stem = re.sub(r"_(mean|max|min|p50|p90|p95|p99)$", "", name)
    return nonneg(v, what) if stem.endswith(UNSIGNED) else num(v, what)


def whole(v, what, lo=0, hi=None, why=""):
    """An integer lo..hi (a count or an id); `why` says what bounds it."""
    x = num(v, what)
    if not x.is_integer():
        raise UsageError(f"{what}: {_shown(v)} is not a whole number")
    if x < lo or (hi is not None and x > hi):
        side = f"below {lo}" if x < lo else f"above {hi}"
        raise UsageError(f"{what}: {_shown(v)} is {side}{why}")
    return int(x)


def once(seen, key, what):
    """Refuses a second entry for `key` (an object list keyed by name or id, where the last one
    had won silently). seen: {key: where it came first}, updated."""
    if key in seen:
        raise UsageError(f"{what}: {_shown(key)} again (first at {seen[key]}): each appears once")
    seen[key] = what.rpartition(": ")[2]


def chip_cores(data, path):
    """The number of cores of a result's chip from its resolved config (noc rows x cols, or
    nodes); None when config gives neither (a hand-made result, an edges topology). A config
    that is not text is refused."""
    cfg = data.get("config")
    if cfg is None:
        return None
    if not isinstance(cfg, str):
        raise UsageError(f"{path}: config: {_shown(cfg)[:60]} is not the resolved experiment "
                         f"(text format, as tpsim run writes it)")
    got = {}
    for field in ("rows", "cols", "nodes"):
        v = config_value(cfg, "noc", field)
        got[field] = int(v) if v is not None and re.fullmatch(r"[0-9]+", v) else 0
    if got["rows"] and got["cols"]:
        return got["rows"] * got["cols"]
    return got["nodes"] or None


def write_stdout(text):
    """Writes text to stdout and flushes it; a failure (a full disk, a closed pipe) is a
    WriteError (exit 1), not a lost table and exit 0."""
    if sys.stdout is None:  # started with stdout closed
        if text:
            raise WriteError("cannot write to stdout: it is closed")
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        try:  # what is left in the buffer goes nowhere, so that exit does not fail again
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, sys.stdout.fileno())
            os.close(fd)
        except (OSError, ValueError):
            pass
        raise WriteError(f"cannot write to stdout: {_strerror(e)}")


def config_value(cfg, block, field):
    """The first `field: value` inside the first `block { ... }` of a resolved experiment in
    text format (None when absent). Good enough for the scalar fields a title needs."""
    if not isinstance(cfg, str):
        return None
    m = re.search(r"\b" + re.escape(block) + r"\s*\{", cfg)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(cfg) and depth:
        depth += {"{": 1, "}": -1}.get(cfg[i], 0)
        i += 1
    inner = cfg[m.end():i]
    # Only the block's own level: drop nested blocks.
    flat, depth = [], 0
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    v = re.search(r"(?m)^\s*" + re.escape(field) + r"\s*:\s*(\"[^\"]*\"|\S+)", "".join(flat))
    if not v:
        return None
    return v.group(1).strip('"')


# ---- units ----------------------------------------------------------------------------------
#
# Every config field and metric states its unit in its name (DESIGN.md); an axis label is the
# name with that suffix replaced by the unit, and values are scaled to a readable unit.

TIME_UNITS = (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3), ("ps", 1.0))  # in ps
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
# Suffix -> (unit label, unit size in the base unit of its kind, kind).
SUFFIXES = (
    ("_ps", "ps", 1.0, "time"), ("_ns", "ns", 1e3, "time"), ("_us", "us", 1e6, "time"),
    ("_ms", "ms", 1e9, "time"), ("_s", "s", 1e12, "time"),
    ("_bytes", "B", 1, "bytes"),
    ("_gbps", "GB/s", None, None), ("_tflops", "TFLOP/s", None, None),
    ("_gflops", "GFLOP/s", None, None), ("_cycles", "cycles", None, None),
    ("_pct", "%", None, None), ("_per_s", "1/s", None, None), ("_tokens", "tokens", None, None),
    ("_mhz", "MHz", None, None), ("_ghz", "GHz", None, None), ("_w", "W", None, None),
    ("_pj", "pJ", None, None),
)


def split_unit(name):
    """(stem, suffix entry or None). 'decode_step_ps_mean' -> ('decode_step mean', _ps)."""
    stem, tail = name, ""
    for t in ("_mean", "_max", "_min", "_p50", "_p90", "_p95", "_p99"):
        if stem.endswith(t):
            stem, tail = stem[: -len(t)], " " + t[1:]
            break
    for s in SUFFIXES:
        if stem.endswith(s[0]) and len(stem) > len(s[0]):
            return stem[: -len(s[0])] + tail, s
    return name, None


def axis_unit(name, values):
    """(factor, label): multiply values by factor to draw them; the label names the unit.

    Times are drawn in s, ms, us or ns and bytes in GiB, MiB, KiB or B, by the largest value;
    utilisation fractions ('utilization' names) in %; seq_len in tokens."""
    if name.endswith("_per_s"):  # a rate (requests_per_s, goodput_per_s): per second, not a time
        return 1.0, f"{name} (1/s)"
    finite = [abs(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    vmax = max(finite, default=0.0)
    stem, s = split_unit(name)
    if "." in name:  # a config field path: keep it whole, the reader types it
        stem = name
    if s is not None and s[3] == "time":
        base = vmax * s[2]  # in ps
        unit, size = next(((u, f) for u, f in TIME_UNITS if base >= f), (s[1], s[2]))
        return s[2] / size, f"{stem} ({unit})"
    if s is not None and s[3] == "bytes":
        unit, size = next(((u, f) for u, f in BYTE_UNITS if vmax >= f), BYTE_UNITS[-1])
        return 1.0 / size, f"{stem} ({unit})"
    if s is not None:
        return 1.0, f"{stem} ({s[1]})"
    if name.endswith("utilization") or name.endswith("utilisation"):
        return 100.0, f"{name} (%)"
    if name.endswith("seq_len") or name.endswith("_len"):
        return 1.0, f"{name} (tokens)"
    return 1.0, name


def fmt_value(v):
    """A compact, deterministic text for a swept value (4096, 0.5, k_split)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def value_key(v):
    """Sorts numbers numerically before text."""
    if isinstance(v, (int, float)):
        return (0, float(v), "")
    try:
        return (0, float(v), str(v))
    except (TypeError, ValueError):
        return (1, 0.0, str(v))
