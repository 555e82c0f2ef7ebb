#!/usr/bin/env python3
"""A worked example: trains torchvision's ResNet-18 on random images for a few steps on the CPU
and captures its gradients with psbench_trace.

    PYTHONPATH=tools/psbench_trace python3 tools/psbench_trace/example.py OUT.json [--steps=3]

payloads/traces/resnet18_captured.json was written by this script (--steps=3).
"""
import argparse

import torch
import torchvision

import psbench_trace


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with psbench_trace.capture(model, args.out, bucket_size=True) as trace:
        for _ in range(args.steps):
            x, y = torch.randn(args.batch, 3, 64, 64), torch.randint(0, 10, (args.batch,))
            with trace.step():
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    print(f"{args.out}: {trace.num_steps} steps of {len(trace.tensors)} tensors")


if __name__ == "__main__":
    main()
