"""The PS protocol's encodings, written from docs/protocol.md alone (no psbench source).

Shared by the Python client (client.py) and the Python PS (ps.py) of the interop test.
"""
import importlib
import struct
import sys

import xxhash

PAYLOAD_MAGIC = 0x31425350  # "PSB1"
ACK_MAGIC = 0x31415350      # "PSA1"
EXCHANGE_MAGIC = 0x54585350  # "PSXT"
FLAG_VALIDATE = 1
MAX_BUFFERS = 1 << 20

RAW_ECHO = "/psbench.Raw/Echo"
RAW_PUSH = "/psbench.Raw/Push"
RAW_EXCHANGE = "/psbench.Raw/Exchange"

# gRPC's default receive limit (4 MiB) is below an echo of a larger payload.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def load_messages(generated_dir):
    """psbench_pb2, compiled by protoc --python_out from proto/psbench.proto."""
    sys.path.insert(0, generated_dir)
    return importlib.import_module("psbench_pb2")


def checksum(data):
    return xxhash.xxh3_64_intdigest(bytes(data))


class WireError(Exception):
    """A payload that does not follow the format: the PS answers DATA_LOSS."""


def encode_payload(buffers, validate):
    sizes = [len(b) for b in buffers]
    header = struct.pack("<IIII", PAYLOAD_MAGIC, FLAG_VALIDATE if validate else 0, len(buffers), 0)
    header += struct.pack(f"<{len(sizes)}Q", *sizes)
    if validate:
        header += struct.pack(f"<{len(sizes)}Q", *[checksum(b) for b in buffers])
    return header + b"".join(bytes(b) for b in buffers)


def decode_payload(message):
    """(buffers, sender's checksums or None); raises WireError."""
    if len(message) < 16:
        raise WireError("payload shorter than its header")
    magic, flags, n, _ = struct.unpack_from("<IIII", message, 0)
    if magic != PAYLOAD_MAGIC:
        raise WireError(f"bad payload magic 0x{magic:08x}")
    if n > MAX_BUFFERS:
        raise WireError(f"payload claims {n} buffers")
    words = n * (2 if flags & FLAG_VALIDATE else 1)
    if len(message) < 16 + 8 * words:
        raise WireError("payload header truncated")
    sizes = struct.unpack_from(f"<{n}Q", message, 16)
    sums = struct.unpack_from(f"<{n}Q", message, 16 + 8 * n) if flags & FLAG_VALIDATE else None
    at = 16 + 8 * words
    if len(message) - at != sum(sizes):
        raise WireError(f"payload carries {len(message) - at} bytes after its header, "
                        f"the header announces {sum(sizes)}")
    buffers = []
    for size in sizes:
        buffers.append(message[at:at + size])
        at += size
    return buffers, sums


def check_sums(buffers, sums):
    """Raises WireError naming the first buffer whose checksum differs."""
    for i, (b, s) in enumerate(zip(buffers, sums)):
        if checksum(b) != s:
            raise WireError(f"buffer {i} of {len(buffers)} ({len(b)} bytes): checksum differs")


def encode_ack(bytes_received, sums):
    return (struct.pack("<IIII", ACK_MAGIC, 0, len(sums), 0) + struct.pack("<Q", bytes_received)
            + struct.pack(f"<{len(sums)}Q", *sums))


def decode_ack(message):
    """(bytes received, the PS's checksums)."""
    magic, flags, c, _ = struct.unpack_from("<IIII", message, 0)
    if magic != ACK_MAGIC or flags != 0 or len(message) != 24 + 8 * c:
        raise WireError("malformed acknowledgement")
    (received,) = struct.unpack_from("<Q", message, 16)
    return received, list(struct.unpack_from(f"<{c}Q", message, 24))


def exchange_header(kind, worker, num_workers, step, sync, learning_rate, momentum, tensors,
                    run_id, updates_applied=0):
    """The 64-byte header of a training exchange (kind 1 = init, 2 = step)."""
    header = struct.pack("<IHHIIQIffIQQ8x", EXCHANGE_MAGIC, 1, kind, worker, num_workers, step,
                         1 if sync else 0, learning_rate, momentum, tensors, run_id,
                         updates_applied)
    assert len(header) == 64
    return header


def parse_exchange_header(data):
    fields = struct.unpack("<IHHIIQIffIQQ8x", bytes(data))
    names = ("magic", "version", "kind", "worker", "num_workers", "step", "flags",
             "learning_rate", "momentum", "tensors", "run_id", "updates_applied")
    return dict(zip(names, fields))
