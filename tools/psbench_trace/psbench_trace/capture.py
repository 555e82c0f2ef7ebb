"""The tracer: autograd hooks that time each gradient, and the psbench-trace/2 file."""
import contextlib
import json
import os
import platform
import socket
import time
import warnings

import torch

from .buckets import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, assign_buckets, bucket_ready
from .trace_format import FORMAT, MAX_TENSOR_BYTES


def _unwrap(model):
    """The module whose parameters train; for DDP, its bucket size and whether it rebuilds its
    buckets in gradient-ready order (it does not with find_unused_parameters, unless the graph
    is static)."""
    ddp = getattr(torch.nn.parallel, "DistributedDataParallel", None)
    if ddp is not None and isinstance(model, ddp):
        rebuilds = not getattr(model, "find_unused_parameters", False) or getattr(model, "static_graph", False)
        return model.module, int(getattr(model, "bucket_bytes_cap", DDP_BUCKET_BYTES)), rebuilds
    return model, None, True


class Tracer:
    """Records, per training step, when each parameter's gradient became ready.

    model: a torch.nn.Module (or DistributedDataParallel); its parameters that require grad.
    path: where close() writes the trace (None: call save() yourself).
    bucket_size: None for no buckets unless the model is DDP (then DDP's own cap), True for
        DDP's default 25 MiB, or a size in bytes.
    cuda_sync: on CUDA, synchronise the device in each hook so that the time is when the
        gradient exists, not when its kernel was queued (costs some time per gradient).

    The hooks return nothing, so gradients, and the training, stay exactly as they were.
    """

    def __init__(self, model, path=None, bucket_size=None, cuda_sync=True):
        module, ddp_bucket_bytes, self._ready_order_buckets = _unwrap(model)
        if bucket_size is True:
            bucket_size = DDP_BUCKET_BYTES
        elif bucket_size is None:
            bucket_size = ddp_bucket_bytes
        if bucket_size is not None and (isinstance(bucket_size, bool) or int(bucket_size) <= 0):
            raise ValueError(f"psbench_trace: bucket_size must be a positive number of bytes (got {bucket_size!r})")
        self.path = path
        self.bucket_size = None if bucket_size is None else int(bucket_size)
        self.model_name = type(module).__name__
        # A parameter of no elements has no bytes to send.
        self.params = [(name, p) for name, p in module.named_parameters() if p.requires_grad and p.numel() > 0]
        if not self.params:
            raise ValueError("psbench_trace: the model has no parameter that requires grad")
        self.tensors = [{"name": name, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
                         "bytes": p.numel() * p.element_size()} for name, p in self.params]
        too_big = [t["name"] for t in self.tensors if t["bytes"] > MAX_TENSOR_BYTES]
        if too_big:
            warnings.warn(f"psbench_trace: {len(too_big)} parameter(s) over 1 GiB ({too_big[0]}, ...): "
                          "psbench refuses a trace with a tensor over 1 GiB")
        self._cuda_sync = cuda_sync
        self._ready = None  # the current step's ready times (ns), or None outside a step
        self._steps = []
        self._empty_steps = 0
        self._handles = [p.register_hook(self._hook(i, p)) for i, (_, p) in enumerate(self.params)]

    def _cuda(self):
        return self._cuda_sync and self.params[0][1].is_cuda  # where the model is now

    def _hook(self, index, param):
        def hook(grad):
            if self._ready is not None:
                if self._cuda_sync and grad.is_cuda:
                    torch.cuda.synchronize(grad.device)
                # The last backward of the step counts (gradient accumulation).
                self._ready[index] = time.perf_counter_ns()
            return None  # the gradient as it is

        return hook

    @contextlib.contextmanager
    def step(self):
        """Wraps one training step: its forward, backward and optimizer step."""
        if self._ready is not None:
            raise RuntimeError("psbench_trace: trace.step() does not nest")
        ready = [None] * len(self.params)
        cuda = self._cuda()
        if cuda:  # the previous step's queued work is not this step's
            torch.cuda.synchronize(self.params[0][1].device)
        start = time.perf_counter_ns()
        self._ready = ready
        try:
            yield self
        finally:
            self._ready = None
        if cuda:  # the step's own queued work (the optimizer's) is part of it
            torch.cuda.synchronize(self.params[0][1].device)
        end = time.perf_counter_ns()  # only a step that finished is recorded
        if all(t is None for t in ready):
            self._empty_steps += 1
            return
        self._steps.append((start, end, ready))

    @property
    def num_steps(self):
        return len(self._steps)

    def trace(self):
        """The trace as a dict (psbench-trace/2)."""
        if not self._steps:
            raise RuntimeError("psbench_trace: no step produced a gradient; "
                               "wrap forward and backward in `with trace.step():`")
        first = self._steps[0][0]
        device = str(self.params[0][1].device)
        us = lambda ns, origin: round((ns - origin) / 1000.0, 3)
        out = {
            "format": FORMAT,
            "source": {
                "tool": "psbench_trace", "torch": torch.__version__, "python": platform.python_version(),
                "model": self.model_name, "device": device, "host": socket.gethostname(),
                "captured_unix_s": round(time.time(), 3), "steps_without_gradients": self._empty_steps,
                "time": "microseconds from the start of each step (trace.step()); ready = the "
                        "gradient's autograd hook" + (" after a CUDA synchronize" if self._cuda() else ""),
            },
            "tensors": self.tensors,
            "steps": [],
        }
        buckets = None
        if self.bucket_size is not None:
            n = len(self.params)
            if self._ready_order_buckets:
                # DDP rebuilds its buckets after its first iteration, in the order gradients were
                # ready there: the first captured step's order stands for it.
                ready0 = self._steps[0][2]
                order = sorted(range(n), key=lambda i: (ready0[i] is None, ready0[i] or 0, -i))
            else:  # DDP with find_unused_parameters keeps its first buckets: model order reversed
                order = list(reversed(range(n)))
            buckets = assign_buckets(order, [t["bytes"] for t in self.tensors],
                                     [t["dtype"] for t in self.tensors], self.bucket_size, DDP_FIRST_BUCKET_BYTES)
            out["buckets"] = {"bucket_bytes": self.bucket_size, "first_bucket_bytes": DDP_FIRST_BUCKET_BYTES,
                              "order": "gradient-ready (first step)" if self._ready_order_buckets else "model, reversed",
                              "tensors": buckets}
        for start, end, ready in self._steps:
            rel = [None if t is None else us(t, start) for t in ready]
            step = {"start_us": us(start, first), "compute_us": us(end, start), "ready_us": rel}
            if buckets is not None:
                step["bucket_ready_us"] = bucket_ready(buckets, rel)
            out["steps"].append(step)
        return out

    def save(self, path=None):
        """Writes the trace to `path` (or the path given at construction); returns the path."""
        path = path or self.path
        if not path:
            raise ValueError("psbench_trace: no path to save the trace to")
        text = json.dumps(self.trace(), indent=1)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
        return path

    def close(self):
        """Removes the hooks; the model is as it was before."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        if exc_type is None and self.path:
            self.save()
        return False


def capture(model, path, bucket_size=None, cuda_sync=True):
    """A Tracer that writes `path` when its `with` block ends without an exception."""
    return Tracer(model, path=path, bucket_size=bucket_size, cuda_sync=cuda_sync)
