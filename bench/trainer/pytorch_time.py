#!/usr/bin/python3
"""Times torchvision models on PyTorch's CPU backend the way `psbench train` times its own:
one fixed synthetic batch, warm-up iterations, then forward and forward+backward images/s.

Debian's python3-torch (1.13) and python3-torchvision (0.14) use the system oneDNN 2.6, so
the two runs share the convolution kernels; what differs is the framework around them.
Dropout is removed (psbench's models have none), the models train in train mode (batch
statistics), gradients are computed for every parameter. Prints one JSON object per line.

  python3 bench/trainer/pytorch_time.py --model=vgg11 --batch=16 --threads=2
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torchvision


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
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=10)
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model, size = build(a.model)
    model.train()
    x = torch.randn(a.batch, 3, size, size)
    y = torch.randint(0, 1000, (a.batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        out = model(x)
        return loss_fn(out, y)

    def train():
        model.zero_grad(set_to_none=True)
        forward().backward()

    for _ in range(a.warmup):
        train()
    result = {"kind": "pytorch_timing", "model": a.model, "batch": a.batch,
              "threads": torch.get_num_threads(), "torch": torch.__version__,
              "torchvision": torchvision.__version__,
              "mkldnn_enabled": torch.backends.mkldnn.is_available(),
              "parameters": sum(t.numel() for t in model.parameters()),
              "host": platform.node(), "warmup_iterations": a.warmup,
              # the oneDNN and OpenMP PyTorch was built with, and the BLAS it runs on
              "build_config": [l.strip() for l in torch.__config__.show().splitlines()
                               if "MKL-DNN" in l or "OpenMP" in l],
              "libblas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}
    for name, fn in (("forward", forward), ("forward_backward", train)):
        times = []
        for _ in range(a.iterations):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        mean = statistics.mean(times)
        result[name] = {"iterations": a.iterations, "mean_s": mean,
                        "median_s": statistics.median(times), "min_s": min(times),
                        "max_s": max(times), "images_per_s": a.batch / mean}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
