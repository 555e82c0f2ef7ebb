#!/usr/bin/env python3
"""psbench_trace (tools/psbench_trace) against real PyTorch: a torchvision model trained on
random data on the CPU, its trace read back by psbench, and training left exactly as it was.

    capture_test.py BIN_DIR   (psbench's bin directory; label trace)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "psbench_trace"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torchvision  # noqa: E402

import psbench_trace  # noqa: E402
from psbench_trace import import_profile  # noqa: E402

BIN = None  # set from argv
STEPS = 3


def make_model(seed=1):
    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=10)


def train(model, steps, trace=None, seed=2):
    """`steps` SGD steps on random 2x3x64x64 images; with `trace`, each wrapped in trace.step()."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        x = torch.randn(2, 3, 64, 64, generator=gen)
        y = torch.randint(0, 10, (2,), generator=gen)

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        if trace is None:
            step()
        else:
            with trace.step():
                step()


def psbench(*args):
    return subprocess.run([os.path.join(BIN, "psbench"), *args], capture_output=True, text=True, timeout=120)


class CaptureTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(2)
        torch.use_deterministic_algorithms(True)
        self.dir = tempfile.TemporaryDirectory(prefix="psbench_trace_")
        self.path = os.path.join(self.dir.name, "resnet18.trace.json")

    def tearDown(self):
        self.dir.cleanup()

    def capture(self, model, **kw):
        with psbench_trace.capture(model, self.path, **kw) as trace:
            train(model, STEPS, trace)
        with open(self.path) as f:
            return json.load(f)

    def test_trace_has_every_gradient_of_every_step(self):
        model = make_model()
        t = self.capture(model)
        self.assertEqual(t["format"], "psbench-trace/2")
        params = [(n, p) for n, p in model.named_parameters()]
        self.assertEqual([x["name"] for x in t["tensors"]], [n for n, _ in params])
        for x, (_, p) in zip(t["tensors"], params):
            self.assertEqual(x["shape"], list(p.shape))
            self.assertEqual(x["dtype"], "float32")
            self.assertEqual(x["bytes"], p.numel() * 4)
        self.assertEqual(len(t["steps"]), STEPS)
        prev_end = 0.0
        for s in t["steps"]:
            self.assertGreaterEqual(s["start_us"], prev_end)
            prev_end = s["start_us"] + s["compute_us"]
            self.assertEqual(len(s["ready_us"]), len(params))
            for r in s["ready_us"]:
                self.assertIsNotNone(r)
                self.assertTrue(0 < r <= s["compute_us"])
            # Backward runs from the output: the classifier's gradients are ready before the stem's.
            names = [x["name"] for x in t["tensors"]]
            self.assertLess(s["ready_us"][names.index("fc.weight")], s["ready_us"][names.index("conv1.weight")])
        self.assertNotIn("buckets", t)

    def test_capture_leaves_training_exactly_as_it_was(self):
        plain, traced = make_model(), make_model()
        train(plain, STEPS)
        self.capture(traced)
        for (name, a), (_, b) in zip(plain.named_parameters(), traced.named_parameters()):
            self.assertTrue(torch.equal(a, b), f"{name} differs after capture")
        # The hooks are gone once the capture ends.
        self.assertTrue(all(not p._backward_hooks for p in traced.parameters()))

    def test_buckets_as_ddp_forms_them(self):
        store = os.path.join(self.dir.name, "store")
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        try:
            model = torch.nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=4)
            t = self.capture(model)
        finally:
            dist.destroy_process_group()
        b = t["buckets"]
        self.assertEqual(b["bucket_bytes"], 4 * 1024 * 1024)
        sizes = [x["bytes"] for x in t["tensors"]]
        members = sorted(i for bucket in b["tensors"] for i in bucket)
        self.assertEqual(members, list(range(len(sizes))))
        totals = [sum(sizes[i] for i in bucket) for bucket in b["tensors"]]
        self.assertGreaterEqual(totals[0], b["first_bucket_bytes"])  # the small first bucket
        for total in totals[1:-1]:
            self.assertGreaterEqual(total, b["bucket_bytes"])
        for s in t["steps"]:
            for bucket, ready in zip(b["tensors"], s["bucket_ready_us"]):
                self.assertEqual(ready, max(s["ready_us"][i] for i in bucket))

    def test_psbench_replays_the_captured_trace(self):
        model = make_model()
        self.capture(model, bucket_size=True)
        out = os.path.join(self.dir.name, "run.jsonl")
        r = psbench("run", "--benchmark=latency", "--scheme=trace", f"--trace={self.path}", "--iterations=5",
                    "--warmup-iterations=1", "--validate", f"--json={out}")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            record = json.loads(f.readline())
        self.assertEqual(record["payload_bytes"], sum(p.numel() * 4 for p in model.parameters()))
        self.assertEqual(len(record["buffers"]), len(list(model.parameters())))

    def test_psbench_replays_the_captured_steps_timed(self):
        # Fresh from PyTorch: 2 workers x 2 PS replay the steps as they ran, each DDP bucket sent
        # when it became ready; every parameter exact, the run as long as its recorded compute.
        self.capture(make_model(), bucket_size=True)
        with open(self.path) as f:
            captured = json.load(f)
        out = os.path.join(self.dir.name, "timed.jsonl")
        r = psbench("run", "--benchmark=updates", "--scheme=trace", f"--trace={self.path}", "--replay=timed",
                    f"--steps={STEPS}", "--num-workers=2", "--num-ps=2", f"--json={out}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("# timed replay", r.stdout)
        with open(out) as f:
            records = [json.loads(line) for line in f]
        self.assertEqual(len(records), 2)
        for record in records:
            self.assertEqual(record["result"], "exact")
            replay = record["replay"]
            self.assertEqual(replay["buckets"], len(captured["buckets"]["tensors"]))
            self.assertEqual([s["compute_us"] for s in replay["steps"]],
                             [s["compute_us"] for s in captured["steps"]])
            self.assertGreaterEqual(record["seconds"] * 1e6, sum(s["compute_us"] for s in captured["steps"]))
            for step in replay["steps"]:
                self.assertGreaterEqual(step["exposed_us"], -1)

    def test_psbench_refuses_a_trace_it_cannot_follow(self):
        self.capture(make_model())
        with open(self.path) as f:
            t = json.load(f)
        for change, expected in [
            (lambda t: t.update(format="psbench-trace/9"), "unsupported 'format'"),
            (lambda t: t["steps"][1].pop("compute_us"), "step 1: missing 'compute_us'"),
            (lambda t: t["steps"][1].update(start_us=0), "steps out of order"),
            (lambda t: t["tensors"][0].update(dtype="float128"), "unknown dtype"),
        ]:
            bad = json.loads(json.dumps(t))
            change(bad)
            path = os.path.join(self.dir.name, "bad.json")
            with open(path, "w") as f:
                json.dump(bad, f)
            r = psbench("run", "--benchmark=latency", "--scheme=trace", f"--trace={path}", "--iterations=5")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(expected, r.stderr)

    def test_a_profile_of_one_step_imports(self):
        """torch 1.13's execution graph (shapes, order) and legacy chrome trace (times)."""
        model = make_model()
        eg_path, chrome_path = (os.path.join(self.dir.name, n) for n in ("eg.json", "chrome.json"))
        eg = torch.profiler.ExecutionGraphObserver()
        eg.register_callback(eg_path)
        with torch.autograd.profiler.profile(use_kineto=False) as prof:
            eg.start()
            train(model, 1)
            eg.stop()
        eg.unregister_callback()
        prof.export_chrome_trace(chrome_path)
        sizes = sorted(p.numel() * 4 for p in model.parameters())
        timed, untimed = (os.path.join(self.dir.name, n) for n in ("timed.json", "untimed.json"))
        self.assertEqual(import_profile.main(["--execution-graph", eg_path, "--chrome-trace", chrome_path, timed]), 0)
        self.assertEqual(import_profile.main(["--execution-graph", eg_path, untimed]), 0)
        with open(timed) as f:
            t = json.load(f)
        self.assertEqual(t["format"], "psbench-trace/2")
        self.assertEqual(sorted(x["bytes"] for x in t["tensors"]), sizes)
        ready = t["steps"][0]["ready_us"]
        self.assertEqual(ready, sorted(ready), "in the order backward produced them")
        self.assertLessEqual(ready[-1], t["steps"][0]["compute_us"])
        with open(untimed) as f:
            self.assertEqual(sorted(x["bytes"] for x in json.load(f)["params"]), sizes)
        for path in (timed, untimed):
            r = psbench("run", "--benchmark=latency", "--scheme=trace", f"--trace={path}", "--iterations=3",
                        "--warmup-iterations=1")
            self.assertEqual(r.returncode, 0, r.stderr)
        # A chrome trace of another step, or no execution graph: exit 2 with one line.
        train(model, 1)
        self.assertEqual(import_profile.main(["--execution-graph", chrome_path, untimed]), 2)


if __name__ == "__main__":
    BIN = sys.argv.pop(1)
    unittest.main(verbosity=2)
