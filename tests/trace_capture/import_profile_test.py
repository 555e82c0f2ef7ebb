#!/usr/bin/env python3
"""psbench_trace.import_profile without PyTorch: hand-written profiles in, a trace or one line
and exit 2 out; its inputs are never written over and nothing waits on a FIFO.

    import_profile_test.py   (label unit; any Python 3)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "tools", "psbench_trace")
ACC = "torch::autograd::AccumulateGrad"
# A Python in which `import torch` fails, as where PyTorch is not installed.
NO_TORCH = "import sys; sys.modules['torch'] = None; import runpy; sys.argv[0] = 'import_profile'; " \
           "runpy.run_module('psbench_trace.import_profile', run_name='__main__')"


def node(id_, shape, numel, itemsize=4, kind="Tensor(float)"):
    return {"id": id_, "name": ACC, "input_shapes": [shape], "input_types": [kind],
            "inputs": [[1, 2, 3, numel, itemsize]]}


class ImportProfileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.eg = self.write("eg.json", {"nodes": [node(5, [2, 3], 6), node(7, [4], 4)]})
        self.chrome = self.write("chrome.json", {"traceEvents": [
            {"name": "step", "ts": 100, "dur": 50}, {"name": ACC, "ts": 120, "dur": 2}, {"name": ACC, "ts": 130, "dur": 3}]})

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write(self, name, value):
        with open(self.path(name), "w") as f:
            f.write(value if isinstance(value, str) else json.dumps(value))
        return self.path(name)

    def run_tool(self, *args):
        env = dict(os.environ, PYTHONPATH=PACKAGE)
        return subprocess.run([sys.executable, "-c", NO_TORCH, *args], env=env, capture_output=True, text=True,
                              timeout=30)

    def assert_refused(self, r, *words):
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("psbench_trace.import_profile: "), lines[0])
        for w in words:
            self.assertIn(w, lines[0])

    def test_a_timed_trace_without_pytorch(self):
        out = self.path("out.json")
        r = self.run_tool("--execution-graph", self.eg, "--chrome-trace", self.chrome, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            t = json.load(f)
        self.assertEqual(t["format"], "psbench-trace/2")
        self.assertEqual([x["bytes"] for x in t["tensors"]], [24, 16])
        self.assertEqual(t["steps"][0]["ready_us"], [22.0, 33.0])
        self.assertEqual(t["steps"][0]["compute_us"], 50.0)

    def test_inputs_are_never_written_over(self):
        with open(self.eg) as f:
            before = f.read()
        for given in (["--execution-graph", self.eg, self.eg],
                      ["--execution-graph", self.eg, "--chrome-trace", self.chrome, self.chrome]):
            self.assert_refused(self.run_tool(*given), "write the trace elsewhere")
        with open(self.eg) as f:
            self.assertEqual(f.read(), before)

    def test_bad_inputs_and_outputs_are_one_line(self):
        fifo = self.path("fifo.json")
        os.mkfifo(fifo)
        cases = [
            (["--execution-graph", fifo], "not a regular file"),
            (["--execution-graph", self.path("missing.json")], "No such file"),
            (["--execution-graph", self.write("shape.json", {"nodes": [node(1, 5, 6)]})], "node 1"),
            (["--execution-graph", self.write("neg.json", {"nodes": [node(1, [2], -2)]})], "-2 elements"),
            (["--execution-graph", self.write("nan.json", '{"nodes": [NaN]}')], "NaN is not a number"),
            (["--execution-graph", self.eg, "--chrome-trace", self.write("nots.json", {"traceEvents": [{"ts": "x"}]})],
             "no event with a time"),
            (["--execution-graph", self.eg, "--chrome-trace", self.write("dur.json", {"traceEvents": [
                {"ts": 1, "dur": "x"}, {"ts": 2}]})], "0 " + ACC),
        ]
        for args, words in cases:
            with self.subTest(args=args):
                self.assert_refused(self.run_tool(*args, self.path("o.json")), words)
        self.assertFalse(os.path.exists(self.path("o.json")))
        for out, words in ((os.path.join(self.dir.name, "no", "o.json"), "No such file"), (self.dir.name, "directory")):
            self.assert_refused(self.run_tool("--execution-graph", self.eg, out), "cannot write", words)

    def test_the_capture_says_it_needs_pytorch(self):
        env = dict(os.environ, PYTHONPATH=PACKAGE)
        r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['torch'] = None\n"
                            "import psbench_trace\nprint(psbench_trace.FORMAT)\npsbench_trace.capture"],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "psbench-trace/2\n")
        self.assertIn("ImportError: psbench_trace: the capture needs PyTorch", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
