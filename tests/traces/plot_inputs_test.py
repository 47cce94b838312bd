#!/usr/bin/env python3
"""Bad inputs of `tpsim plot` (traces/plot/*.py): each is refused with exit 2 and one line
that names the file, the field and the value, never a traceback, a bare exception name or a
picture drawn from NaN.

    python3 tests/traces/plot_inputs_test.py build/bin/tpsim [unittest options]

TPSIM_PLOT_SCRIPT, when set, names the script tpsim plot runs (traces/plot.cc).
"""

import copy
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

TPSIM = None

# A 2x2 mesh result as tpsim run --tasks --out writes it (proto3 JSON: zero fields left out).
RESULT = {
    "experiment": "tiny",
    "engine": "analytical",
    "config": "name: \"tiny\"\nchip {\n  noc {\n    topology: \"mesh\"\n    rows: 2\n    cols: 2\n  }\n}\n",
    "summary": {"energy_modelled": True, "energy_j": 0.01, "compute_energy_j": 0.004,
                "sram_energy_j": 0.002, "network_energy_j": 0.001, "memory_energy_j": 0.002,
                "static_energy_j": 0.001, "energy_per_token_j": 0.0025, "average_power_w": 120.5},
    "ops": [{"op": "q_proj", "energy_j": 0.005}, {"op": "o_proj", "energy_j": 0.003}],
    "links": [{"name": "r0c0->r0c1", "bytes": 1600, "utilization": 0.9},
              {"name": "r0c1->r0c0", "utilization": 0.1},
              {"name": "r1c0->r1c1"}],
    "cores": [{"utilization": 0.8}, {"core": 1, "utilization": 0.4}, {"core": 2}, {"core": 3, "utilization": 0.5}],
    "tasks": [{"start_ps": 0, "end_ps": 10500, "kind": "compute", "op": "q_proj", "dst_core": -1},
              {"id": 1, "start_ps": "0", "end_ps": "10500", "core": 1, "kind": "compute", "dst_core": -1},
              {"id": 2, "start_ps": 10500, "end_ps": 22500, "kind": "transfer", "dst_core": 1}],
}

REQUESTS = ("id,arrival_ms,prompt_tokens,output_tokens,first_token_ms,finish_ms,ttft_ms,mean_tpot_ms,"
            "latency_ms,preemptions,status\n"
            "0,0.000,406,171,340.506,13529.784,340.506,77.584,13529.784,0,ok\n"
            "1,318.149,524,85,1031.388,7062.971,713.239,71.805,6744.822,0,ok\n"
            "2,400.000,90000,4,,,,,,0,rejected\n")
KV = ("group,time_ms,kv_blocks_used,kv_blocks_capacity,running,waiting,iteration_tokens\n"
      "decode,340.506,26,100,0,0,406\n"
      "decode,737.903,33,100,1,0,512\n")


class PlotInputs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tpsim_plot_inputs_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w", encoding="utf-8") as f:
            f.write(text)
        return self.path(name)

    def result(self, name, edit=None, text=None):
        """RESULT (edited by edit(r)) as JSON; text: (old, new) replaced in the JSON text."""
        r = copy.deepcopy(RESULT)
        if edit:
            edit(r)
        s = json.dumps(r, indent=1)  # NaN and Infinity as Python writes them
        if text:
            self.assertIn(text[0], s)
            s = s.replace(*text, 1)
        return self.write(name, s)

    def plot(self, *args, stdout=subprocess.PIPE):
        env = dict(os.environ, MPLBACKEND="Agg")
        p = subprocess.run([TPSIM, "plot", *args], stdout=stdout, stderr=subprocess.PIPE, env=env,
                           timeout=120)
        return p.returncode, p.stdout.decode() if p.stdout else "", p.stderr.decode()

    def refused(self, args, *needles, rc=2):
        """`tpsim plot ARGS` exits rc with one line on stderr holding each needle, and draws nothing."""
        out = self.path("out.png")
        code, _, err = self.plot(*args, "--out", out)
        self.assertEqual(code, rc, f"{args}: {err}")
        self.assertTrue(err.startswith("tpsim plot: "), err)
        self.assertEqual(err.count("\n"), 1, err)
        for bad in ("Traceback", "bad input:", "Warning"):
            self.assertNotIn(bad, err)
        for n in needles:
            self.assertIn(n, err)
        self.assertFalse(os.path.exists(out), f"{args}: drew {out}")
        return err

    # A result and CSVs tpsim writes are drawn: the checks below refuse only bad input.
    def test_good_inputs_are_drawn(self):
        r = self.result("r.json")
        dump = self.path("h.json")
        for args in (("heatmap", r, "--dump-series", dump), ("timeline", r), ("energy", r),
                     ("serving", self.write("req.csv", REQUESTS), self.write("kv.csv", KV))):
            code, _, err = self.plot(*args, "--out", self.path("ok.png"))
            self.assertEqual(code, 0, f"{args[0]}: {err}")
        with open(dump) as f:  # a link or core without utilization is idle: 0, as proto3 JSON omits it
            d = json.load(f)["panels"][0]
        self.assertEqual(d["links"]["r1c0->r1c1"], 0.0)
        self.assertEqual(d["cores"]["2"], 0.0)

    # 1. NaN, Infinity, -Infinity and 1e400 (Python's reader took them) in a result.
    def test_non_finite_json_number(self):
        for field, edit, text, cmd in (
                ("links[0].utilization: NaN", lambda r: r["links"][0].update(utilization=float("nan")), None, "heatmap"),
                ("links[1].utilization: Infinity", lambda r: r["links"][1].update(utilization=float("inf")), None, "heatmap"),
                ("cores[0].utilization: NaN", lambda r: r["cores"][0].update(utilization=float("nan")), None, "energy"),
                ("summary.compute_energy_j: -Infinity", None, ('"compute_energy_j": 0.004', '"compute_energy_j": -Infinity'), "energy"),
                ("summary.energy_j: 1e400", None, ('"energy_j": 0.01', '"energy_j": 1e400'), "energy"),
                ("tasks[0].end_ps: NaN", lambda r: r["tasks"][0].update(end_ps=float("nan")), None, "timeline")):
            with self.subTest(field=field):
                r = self.result("r.json", edit, text)
                self.refused((cmd, r), r + ": " + field, "is not a finite number")

    # 2. A key named twice (the last one had won).
    def test_duplicate_json_key(self):
        for cmd, text, needle in (
                ("heatmap", ('"utilization": 0.9', '"utilization": 0.9, "utilization": 0.1'),
                 "links[0]: key 'utilization' appears twice"),
                ("energy", ('"experiment": "tiny"', '"experiment": "tiny", "experiment": "b"'),
                 "the top-level object: key 'experiment' appears twice")):
            with self.subTest(needle=needle):
                r = self.result("r.json", text=text)
                self.refused((cmd, r), r + ": " + needle)

    # 3. An option value that parses to inf.
    def test_non_finite_option(self):
        r = self.result("r.json")
        for args in (("heatmap", r, "--vmax", "1e400"), ("heatmap", r, "--metric", "bytes", "--vmax", "1e308GiB"),
                     ("timeline", r, "--window", "0:1e400")):
            with self.subTest(args=args[2:]):
                self.refused(args, f"{args[-2]} '{args[-1]}'", "not a finite number")

    # 4. A sweep store's metric that is inf, or a negative time.
    def test_sweep_store_values(self):
        for value, needle in (("1e999", "point 1: prefill_ps: inf is not a finite number"),
                              ("-5", "point 1: prefill_ps: -5 is negative")):
            with self.subTest(value=value):
                db = self.path(f"s{len(value)}.sqlite")
                con = sqlite3.connect(db)
                con.execute('CREATE TABLE points (config_hash TEXT, point_index INTEGER, status TEXT, '
                            '"workload.seq_len" INTEGER, prefill_ps INTEGER)')
                con.execute("INSERT INTO points VALUES ('a', 0, 'ok', 128, 1000)")
                con.execute(f"INSERT INTO points VALUES ('b', 1, 'ok', 512, {value})")
                con.commit()
                con.close()
                self.refused(("sweep", db, "--x", "workload.seq_len", "--y", "prefill_ps"), db + ": " + needle)

    # 5. The serving CSVs: strict numbers, times, block counts, rows and header.
    def test_serving_csv(self):
        kv = self.write("kv.csv", KV)
        req = self.write("req.csv", REQUESTS)
        row = "0,0.000,406,171,340.506,13529.784,340.506,77.584,13529.784,0,ok"
        for cell, needle in (("nan", ":2:ttft_ms: 'nan' is not a number"),
                             ("inf", ":2:ttft_ms: 'inf' is not a number"),
                             ("-1.5", ":2:ttft_ms: '-1.5' is negative"),
                             ("1e308", ":2:ttft_ms: '1e308' is above 9.223e+09 ms"),
                             ("1_000", ":2:ttft_ms: '1_000' is not a number"),
                             ("\u0663\u0664\u0660", ":2:ttft_ms: '\u0663\u0664\u0660' is not a number")):
            with self.subTest(ttft=cell):
                bad = self.write("bad.csv", REQUESTS.replace(row, row.replace(",340.506,77", f",{cell},77")))
                self.refused(("serving", bad, kv), bad + needle)
        for text, new, needle in ((row, row[:-3], ":2: 10 fields, the header has 11"),  # status lost
                                  ("latency_ms,", "ttft_ms,", ":1: column 'ttft_ms' appears twice")):
            with self.subTest(needle=needle):
                bad = self.write("bad.csv", REQUESTS.replace(text, new, 1))
                self.refused(("serving", bad, kv), bad + needle)
        line = "decode,737.903,33,100,1,0,512"
        for new, needle in (("decode,737.903,-2,100,1,0,512", ":3:kv_blocks_used: '-2' is below 0"),
                            ("decode,737.903,130,100,1,0,512", ":3:kv_blocks_used: '130' is above 100"),
                            ("decode,737.903,0,0,1,0,512", ":3:kv_blocks_capacity: '0' is below 1"),
                            ("decode,nan,33,100,1,0,512", ":3:time_ms: 'nan' is not a number")):
            with self.subTest(kv=new):
                bad = self.write("badkv.csv", KV.replace(line, new))
                self.refused(("serving", req, bad), bad + needle)

    # 5. JSON true read as 1 by float().
    def test_json_bool_is_not_a_number(self):
        r = self.result("r.json", lambda r: r["summary"].update(compute_energy_j=True))
        self.refused(("energy", r), r + ": summary.compute_energy_j: true is not a number")

    # 6. Values a result cannot hold: negative, repeated, off the chip.
    def test_impossible_result_values(self):
        def link(**kw):
            return lambda r: r["links"][0].update(**kw)
        for cmd, edit, needle in (
                ("heatmap", link(utilization=-0.5), "links[0].utilization: -0.5 is negative"),
                ("heatmap", lambda r: r["links"].append({"name": "r0c0->r0c1"}),
                 "links[3].name: 'r0c0->r0c1' again (first at links[0].name)"),
                ("heatmap", lambda r: r["cores"].append({"core": 1, "utilization": 0.1}),
                 "cores[4].core: 1 again (first at cores[1].core)"),
                ("heatmap", link(name="r9c9->r9c8"), "links[0].name 'r9c9->r9c8': node r9c9 is outside the 2x2 grid"),
                ("timeline", lambda r: r["tasks"][1].update(core=-3), "tasks[1].core: -3 is below 0"),
                ("timeline", lambda r: r["tasks"][1].update(core=10 ** 12), "tasks[1].core: 1000000000000 is above 3"),
                ("energy", lambda r: r["ops"][1].update(energy_j=-5), "ops[1].energy_j: -5 is negative"),
                ("energy", lambda r: r["summary"].update(memory_energy_j=-0.1), "summary.memory_energy_j: -0.1 is negative")):
            with self.subTest(needle=needle):
                r = self.result("r.json", edit)
                self.refused((cmd, r), r + ": " + needle)

    # 7. Python exceptions that leaked as "bad input: KeyError: 0", StopIteration, RecursionError.
    def test_no_leaked_exception(self):
        for cmd, edit, text, needle in (
                ("heatmap", lambda r: r["cores"][0].update(core=-1), None, "cores[0].core: -1 is below 0"),
                ("timeline", lambda r: r["tasks"][0].update(end_ps="Infinity"), None,
                 "tasks[0].end_ps: 'Infinity' is not a number"),
                ("timeline", lambda r: r["tasks"][0].update(kind="bogus"), None, "tasks[0].kind 'bogus'"),
                ("timeline", None, ('"tasks": [', '"deep": ' + "[" * 100000 + "]" * 100000 + ', "tasks": ['),
                 "arrays or objects nested too deeply")):
            with self.subTest(needle=needle):
                r = self.result("r.json", edit, text)
                self.refused((cmd, r), r + ": " + needle)

    # 7b. An unknown option is named before a missing argument ("the following arguments are
    # required" was all `plot heatmap --bogus` said); a negative value is not taken for one.
    def test_unknown_option_named_first(self):
        for cmd in ("heatmap", "timeline", "sweep", "energy", "front", "serving"):
            with self.subTest(cmd=cmd):
                code, _, err = self.plot(cmd, "--bogus")
                self.assertEqual(code, 2, err)
                self.assertEqual(err, "tpsim plot: unrecognized arguments: --bogus\n")
        code, _, err = self.plot("heatmap", self.path("none.json"), "--vmax", "-1", "--out", self.path("o.png"))
        self.assertNotIn("unrecognized", err)

    # 8. A missing or garbled config: the message names config.
    def test_config_named(self):
        def no_config(r):
            del r["config"]
            r["cores"] += [{"core": 4}]
        for edit, needles in ((no_config, (": cores[4].core: 4 is above 3", "config gives no noc rows and cols")),
                              (lambda r: r.update(config=5), (": config: 5 is not the resolved experiment",))):
            with self.subTest(needle=needles[0]):
                r = self.result("r.json", edit)
                self.refused(("heatmap", r), *(r + n if n.startswith(":") else n for n in needles))

    # 9. A directory as input.
    def test_directory_input(self):
        self.refused(("heatmap", self.dir), self.dir + ": is a directory")

    # 10. Abbreviated options (--ou for --out).
    def test_no_abbreviations(self):
        r = self.result("r.json")
        code, _, err = self.plot("heatmap", r, "--ou", self.path("x.png"))
        self.assertEqual(code, 2, err)
        self.assertIn("--ou", err)
        self.assertFalse(os.path.exists(self.path("x.png")))

    # 11. A table that cannot be written to stdout.
    def test_stdout_write_failure(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        db = self.path("s.sqlite")
        con = sqlite3.connect(db)
        con.execute('CREATE TABLE points (point_index INTEGER, status TEXT, "workload.seq_len" INTEGER, prefill_ps INTEGER)')
        con.execute("INSERT INTO points VALUES (0, 'ok', 128, 1000)")
        con.commit()
        con.close()
        with open("/dev/full", "wb") as full:
            code, _, err = self.plot("sweep", db, "--x", "workload.seq_len", "--y", "prefill_ps", "--table",
                                     "--out", self.path("t.png"), stdout=full)
        self.assertEqual(code, 1, err)
        self.assertIn("tpsim plot: cannot write to stdout: No space left on device", err)
        self.assertNotIn("Exception", err)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: plot_inputs_test.py PATH/TO/tpsim [unittest options]")
    TPSIM = os.path.abspath(sys.argv.pop(1))
    unittest.main()
