"""A minimal PS in Python, from docs/protocol.md: the control plane (GetInfo, Session, Goodbye,
Barrier) and Echo and Push in both wire modes, enough for psbench-worker's latency, bandwidth
and throughput benchmarks. Prints "listening on HOST:PORT" once serving; SIGTERM stops it.

    ps.py GENERATED_DIR [MAX_MESSAGE_BYTES [PLANE]]

PLANE (default "grpc") is what GetInfo says carries its payloads; its tally of what the data
calls moved comes with it. Another name makes a PS that misreports its plane, which a worker
must refuse after writing its record.
"""
import concurrent.futures
import os
import secrets
import signal
import socket
import sys
import threading
import time

import grpc

import wire


class State:
    def __init__(self, max_message_bytes, plane):
        self.lock = threading.Lock()
        self.plane = plane
        self.moved = {k: 0 for k in ("messages_sent", "messages_received", "bytes_sent", "bytes_received",
                                     "payload_bytes_sent", "payload_bytes_received")}
        self.start = time.monotonic()
        self.instance = secrets.token_hex(8)
        self.max_message_bytes = max_message_bytes
        self.rpcs = 0
        self.bytes = 0
        self.next_session = 1
        self.said_goodbye = set()
        self.sessions_lost = 0
        self.barriers = {}  # name -> {"parties", "waiting": {index: (nonce, seen)}, "released": set}

    def count(self, nbytes):
        with self.lock:
            self.rpcs += 1
            self.bytes += nbytes
            self.moved["payload_bytes_received"] += nbytes  # as psbench's PS: the accepted payloads

    def tally(self, way, nbytes, payload=0):
        """A data message received or sent: its bytes, `payload` of them the payload's (a
        received one's payload counts once accepted: count)."""
        with self.lock:
            self.moved[f"messages_{way}"] += 1
            self.moved[f"bytes_{way}"] += nbytes
            self.moved[f"payload_bytes_{way}"] += payload


def main():
    pb = wire.load_messages(sys.argv[1])
    state = State(int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30, sys.argv[3] if len(sys.argv) > 3 else "grpc")

    def data_loss(context, error):
        context.abort(grpc.StatusCode.DATA_LOSS, f"PS: {error}")

    # --- the data plane ----------------------------------------------------------------------
    def raw_call(push):
        def handle(request, context):
            state.tally("received", len(request))  # where the bytes meet the PS, valid or not
            try:
                buffers, sums = wire.decode_payload(request)
                if sums is not None:
                    wire.check_sums(buffers, sums)
            except wire.WireError as e:
                data_loss(context, e)
            total = sum(len(b) for b in buffers)
            state.count(total)
            reply = wire.encode_ack(total, [wire.checksum(b) for b in buffers] if sums is not None else []) if push else request
            state.tally("sent", len(reply), 0 if push else total)
            return reply
        return handle

    def serialized_call(push):
        def handle(message, context):
            # A message that does not parse never reaches this handler, so it goes uncounted here.
            state.tally("received", message.ByteSize())
            if message.checksums and len(message.checksums) != len(message.buffers):
                data_loss(context, "one checksum per buffer")
            computed = [wire.checksum(b) for b in message.buffers] if message.checksums else []
            for i, (got, sent) in enumerate(zip(computed, message.checksums)):
                if got != sent:
                    data_loss(context, f"buffer {i} of {len(message.buffers)}: checksum differs")
            total = sum(len(b) for b in message.buffers)
            state.count(total)
            reply = pb.AckMessage(bytes_received=total, checksums=computed) if push else message
            state.tally("sent", reply.ByteSize(), 0 if push else total)
            return reply
        return handle

    # --- the control plane -------------------------------------------------------------------
    def get_info(request, context):
        times = os.times()
        with state.lock:
            return pb.ServerInfo(host=socket.gethostname(), pid=os.getpid(), version="python-interop",
                                 grpc_version=grpc.__version__, transport="grpc",
                                 cpu_user_s=times.user, cpu_system_s=times.system,
                                 rpcs_served=state.rpcs, bytes_received=state.bytes,
                                 wall_s=time.monotonic() - state.start,
                                 sessions_lost=state.sessions_lost, instance=state.instance,
                                 plane=state.plane, moved=pb.DataCounts(**state.moved))

    def session(request, context):
        with state.lock:
            session_id = state.next_session
            state.next_session += 1
        yield pb.SessionReply(max_message_bytes=state.max_message_bytes, session_id=session_id)
        while context.is_active():  # held until the worker ends it or goes away
            time.sleep(0.02)
        with state.lock:
            if session_id not in state.said_goodbye:
                state.sessions_lost += 1

    def goodbye(request, context):
        with state.lock:
            state.said_goodbye.add(request.session_id)
        return pb.GoodbyeReply()

    def barrier(request, context):
        if request.parties < 1 or not 0 <= request.worker_index < request.parties:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "worker index outside [0, parties)")
        now = time.monotonic()
        me = (request.worker_index, request.nonce)
        with state.lock:
            b = state.barriers.setdefault(request.name, {"parties": request.parties, "waiting": {},
                                                         "released": set()})
            if me in b["released"]:
                return pb.BarrierReply(arrived=b["parties"], released=True)
            if b["released"] or not b["waiting"]:
                b["released"] = set()
                b["parties"] = request.parties
            if request.parties != b["parties"]:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "parties differ")
            b["waiting"] = {i: a for i, a in b["waiting"].items() if now - a[1] <= 0.5}
            other = b["waiting"].get(request.worker_index)
            if other and other[0] != request.nonce and now - other[1] < 0.25:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, "two live workers with one index")
            b["waiting"][request.worker_index] = (request.nonce, now)
            if len(b["waiting"]) == b["parties"]:
                b["released"] = {(i, a[0]) for i, a in b["waiting"].items()}
                b["waiting"] = {}
                return pb.BarrierReply(arrived=b["parties"], released=True)
            missing = [i for i in range(b["parties"]) if i not in b["waiting"]][:32]
            return pb.BarrierReply(arrived=len(b["waiting"]), missing=missing)

    def unary(fn, request_type, reply_type):
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=request_type.FromString,
                                                   response_serializer=reply_type.SerializeToString)

    methods = {
        wire.RAW_ECHO: grpc.unary_unary_rpc_method_handler(raw_call(push=False)),
        wire.RAW_PUSH: grpc.unary_unary_rpc_method_handler(raw_call(push=True)),
        "/psbench.wire.PsData/Echo": unary(serialized_call(push=False), pb.PayloadMessage, pb.PayloadMessage),
        "/psbench.wire.PsData/Push": unary(serialized_call(push=True), pb.PayloadMessage, pb.AckMessage),
        "/psbench.wire.PsControl/GetInfo": unary(get_info, pb.InfoRequest, pb.ServerInfo),
        "/psbench.wire.PsControl/Goodbye": unary(goodbye, pb.GoodbyeRequest, pb.GoodbyeReply),
        "/psbench.wire.PsControl/Barrier": unary(barrier, pb.BarrierRequest, pb.BarrierReply),
        "/psbench.wire.PsControl/Session": grpc.unary_stream_rpc_method_handler(
            session, request_deserializer=pb.SessionRequest.FromString,
            response_serializer=pb.SessionReply.SerializeToString),
    }

    class Handler(grpc.GenericRpcHandler):
        def service(self, details):
            return methods.get(details.method)  # None: UNIMPLEMENTED

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=32),
                         handlers=[Handler()],
                         options=[("grpc.max_receive_message_length", state.max_message_bytes),
                                  ("grpc.max_send_message_length", -1)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.2):
        pass
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
