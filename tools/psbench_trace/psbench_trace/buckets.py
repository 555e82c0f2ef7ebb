"""Gradient buckets as DistributedDataParallel forms them, without torch.distributed.

DDP packs gradients into buckets of about `bucket_cap_mb` (25 MiB by default; the first
bucket 1 MiB so that communication starts early), one dtype per bucket, filled in the order
gradients become ready (it rebuilds its buckets in that order after the first iteration). A
bucket goes out when its last gradient is ready.
"""

DDP_BUCKET_BYTES = 25 * 1024 * 1024
DDP_FIRST_BUCKET_BYTES = 1024 * 1024


def assign_buckets(order, sizes, dtypes, bucket_bytes=DDP_BUCKET_BYTES, first_bucket_bytes=DDP_FIRST_BUCKET_BYTES):
    """Groups tensor indices, taken in `order`, into buckets.

    A bucket closes once it holds at least its limit: `first_bucket_bytes` for the first bucket
    of each dtype, `bucket_bytes` after. Returns the buckets in the order they close (then the
    unfinished ones), each a list of tensor indices.
    """
    if bucket_bytes <= 0 or first_bucket_bytes <= 0:
        raise ValueError("bucket sizes must be positive")
    done = []
    open_buckets = {}  # dtype -> (indices, bytes, limit)
    for i in order:
        indices, size, limit = open_buckets.get(dtypes[i], ([], 0, first_bucket_bytes))
        indices.append(i)
        size += sizes[i]
        if size >= limit:
            done.append(indices)
            open_buckets[dtypes[i]] = ([], 0, bucket_bytes)
        else:
            open_buckets[dtypes[i]] = (indices, size, limit)
    done.extend(indices for indices, _, _ in open_buckets.values() if indices)
    return done


def bucket_ready(buckets, ready):
    """Each bucket's ready time: its last member's, or None if a member got no gradient."""
    out = []
    for members in buckets:
        times = [ready[i] for i in members]
        out.append(None if any(t is None for t in times) else max(times))
    return out
