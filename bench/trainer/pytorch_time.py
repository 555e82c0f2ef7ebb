#!/usr/bin/python3
"""Times torchvision models on PyTorch the way `psbench train` times its own: one fixed
synthetic batch, warm-up iterations, then forward and forward+backward images/s.

On the CPU (the default):
Debian's python3-torch (1.13) and python3-torchvision (0.14) use the system oneDNN 2.6, so
the two runs share the convolution kernels; what differs is the framework around them.
Dropout is removed (psbench's models have none), the models train in train mode (batch
statistics), gradients are computed for every parameter. Prints one JSON object per line.

  python3 bench/trainer/pytorch_time.py --model=vgg11 --batch=16 --threads=2

--channels-last (NHWC model and input) applies on the CPU too.

--allocator=retain (the default on the CPU) runs PyTorch with glibc keeping freed memory
(GLIBC_TUNABLES: no mmap'ed blocks, no trimming), as the jemalloc or tcmalloc that PyTorch's
CPU tuning guides recommend would. PyTorch allocates every activation anew each iteration,
and glibc hands blocks over 32 MB back to the kernel when they are freed, so each iteration
page-faults its activations in again: on a 2-vCPU VM, VGG-11 batch 16 forward ran 4.7
images/s that way against 17 with freed memory kept. psbench's trainer allocates its buffers
once. --allocator=default leaves glibc's policy; the record says which ran.

On a GPU (--device=cuda), the peer a user would pick: cuDNN autotuning on (cudnn.benchmark,
as psbench's engine measures its algorithms), --math=fp32 (no TF32), tf32 or bf16
(autocast), and --channels-last (NHWC, often faster on tensor cores). Each iteration is
timed between device synchronizations.

  python3 bench/trainer/pytorch_time.py --device=cuda --math=tf32 --channels-last --model=vgg16 --batch=64
"""
import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time

import torch
import torchvision


# glibc: every block from the heap (no mmap), and freed memory never trimmed (64 GiB).
RETAIN = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"


def build(name):
    if name == "alexnet":
        m, size = torchvision.models.alexnet(), 224
    elif name == "vgg11":
        m, size = torchvision.models.vgg11(), 224
    elif name == "vgg16":
        m, size = torchvision.models.vgg16(), 224
    elif name == "resnet50":
        m, size = torchvision.models.resnet50(), 224
    elif name == "inception3":
        m, size = torchvision.models.inception_v3(aux_logits=False, init_weights=False), 299
    else:
        sys.exit(f"unknown model {name}")
    for mod_name, mod in list(m.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, torch.nn.Dropout):
                setattr(mod, child_name, torch.nn.Identity())
    return m, size


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--batch", default="16", help="one batch size, or several: 32,64")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--math", default="fp32", help="fp32, tf32 or bf16, or several: fp32,tf32")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--allocator", default="retain", choices=["retain", "default"],
                   help="CPU: glibc keeps freed memory (retain) or its default policy")
    a = p.parse_args()
    # Tunables are read when a process starts: run again with them set.
    if a.device == "cpu" and a.allocator == "retain" and os.environ.get("GLIBC_TUNABLES") != RETAIN:
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "GLIBC_TUNABLES": RETAIN})
    maths = a.math.split(",")
    if any(m not in ("fp32", "tf32", "bf16") for m in maths):
        sys.exit("--math takes fp32, tf32, bf16")
    if a.device == "cpu" and maths != ["fp32"]:
        sys.exit("--math is for --device=cuda")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    # One process for every configuration asked for: an import of torch costs seconds.
    for model_name in a.model.split(","):
        for batch in (int(b) for b in a.batch.split(",")):
            for math in maths:
                print(json.dumps(time_one(a, model_name, batch, math)), flush=True)


def time_one(a, model_name, batch, math):
    torch.manual_seed(1)
    model, size = build(model_name)
    model.train()
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 1000, (batch,))
    cuda = a.device == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
        torch.backends.cudnn.allow_tf32 = math == "tf32"
    # channels_last: NHWC activations and weights (on the CPU, oneDNN's convolutions then run
    # without reorders in and out of its blocked layouts around each one).
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    if cuda:
        model = model.to("cuda", memory_format=fmt)
        x, y = x.to("cuda").contiguous(memory_format=fmt), y.to("cuda")
    else:
        model = model.to(memory_format=fmt)
        x = x.contiguous(memory_format=fmt)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        bf16 = math == "bf16"
        with torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            out = model(x)
        return loss_fn(out.float(), y)

    def train():
        model.zero_grad(set_to_none=True)
        forward().backward()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        train()
    result = {"kind": "pytorch_timing", "model": model_name, "batch": batch,
              "threads": torch.get_num_threads(), "torch": torch.__version__,
              "torchvision": torchvision.__version__,
              "mkldnn_enabled": torch.backends.mkldnn.is_available(),
              "parameters": sum(t.numel() for t in model.parameters()),
              "host": platform.node(), "warmup_iterations": a.warmup,
              # the oneDNN and OpenMP PyTorch was built with, and the BLAS it runs on
              "build_config": [l.strip() for l in torch.__config__.show().splitlines()
                               if "MKL-DNN" in l or "OpenMP" in l],
              "libblas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"),
              "device": a.device, "math": math, "channels_last": a.channels_last,
              "allocator": ("retain (GLIBC_TUNABLES=" + RETAIN + ")"
                            if os.environ.get("GLIBC_TUNABLES") == RETAIN else "glibc default")}
    if cuda:
        result["gpu"] = torch.cuda.get_device_name(0)
        result["cuda"] = torch.version.cuda
        result["cudnn"] = torch.backends.cudnn.version()
        result["cudnn_benchmark"] = True
    for name, fn in (("forward", forward), ("forward_backward", train)):
        times = []
        sync()
        for _ in range(a.iterations):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        mean = statistics.mean(times)
        result[name] = {"iterations": a.iterations, "mean_s": mean,
                        "median_s": statistics.median(times), "min_s": min(times),
                        "max_s": max(times), "images_per_s": batch / mean}
    del model, x, y
    if cuda:
        torch.cuda.empty_cache()
    return result


if __name__ == "__main__":
    main()
