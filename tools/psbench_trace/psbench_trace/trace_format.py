"""What psbench reads: the trace format's name and its largest tensor (no PyTorch needed)."""

FORMAT = "psbench-trace/2"

MAX_TENSOR_BYTES = 1 << 30  # the largest tensor psbench replays
