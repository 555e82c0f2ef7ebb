"""A PS client in Python, from docs/protocol.md: echo, push and exchange against psbench-ps in
both wire modes, with and without checksums, and the errors a PS owes a damaged payload.

    client.py GENERATED_DIR HOST:PORT        (exit 0: every check passed)
"""
import random
import struct
import sys
import time

import grpc

import wire


def fail(what):
    print(f"interop client: FAIL: {what}", file=sys.stderr)
    sys.exit(1)


def expect(condition, what):
    if not condition:
        fail(what)
    print(f"interop client: ok: {what}")


def main():
    pb = wire.load_messages(sys.argv[1])
    address = sys.argv[2]
    channel = grpc.insecure_channel(address, options=wire.CHANNEL_OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=10)

    def control(method, request_type, reply_type):
        return channel.unary_unary(f"/psbench.wire.PsControl/{method}",
                                   request_serializer=request_type.SerializeToString,
                                   response_deserializer=reply_type.FromString)

    def data(method, reply_type):
        return channel.unary_unary(f"/psbench.wire.PsData/{method}",
                                   request_serializer=pb.PayloadMessage.SerializeToString,
                                   response_deserializer=reply_type.FromString)

    raw = {m: channel.unary_unary(m) for m in (wire.RAW_ECHO, wire.RAW_PUSH, wire.RAW_EXCHANGE)}
    timeout = 30

    # --- who the PS is, and this client's session -------------------------------------------
    info = control("GetInfo", pb.InfoRequest, pb.ServerInfo)(pb.InfoRequest(), timeout=timeout)
    expect(info.transport == "grpc" and info.instance != "", f"GetInfo: transport {info.transport}, an instance")
    session = channel.unary_stream("/psbench.wire.PsControl/Session",
                                   request_serializer=pb.SessionRequest.SerializeToString,
                                   response_deserializer=pb.SessionReply.FromString)(pb.SessionRequest())
    first = next(session)
    expect(first.max_message_bytes == 1 << 30, f"Session: max_message_bytes {first.max_message_bytes}")

    rng = random.Random(20180324)
    buffers = [bytes(rng.getrandbits(8) for _ in range(size)) for size in (0, 1, 63, 4096)]
    buffers.append(rng.randbytes(65536 + 3))
    total = sum(len(b) for b in buffers)

    # --- non-serialized ---------------------------------------------------------------------------
    for validate in (False, True):
        request = wire.encode_payload(buffers, validate)
        reply = raw[wire.RAW_ECHO](request, timeout=timeout)
        expect(reply == request, f"raw Echo (validate {validate}) comes back byte for byte")
        received, sums = wire.decode_ack(raw[wire.RAW_PUSH](request, timeout=timeout))
        expect(received == total, f"raw Push (validate {validate}): {received} of {total} bytes")
        expect(sums == ([wire.checksum(b) for b in buffers] if validate else []),
               f"raw Push (validate {validate}): the PS's checksums")
    damaged = bytearray(wire.encode_payload(buffers, True))
    damaged[-1] ^= 0x5A
    for method in (wire.RAW_ECHO, wire.RAW_PUSH):
        try:
            raw[method](bytes(damaged), timeout=timeout)
            fail(f"{method}: a damaged payload was accepted")
        except grpc.RpcError as e:
            expect(e.code() == grpc.StatusCode.DATA_LOSS and e.details().startswith("PS: "),
                   f"{method}: damage is DATA_LOSS ({e.details()})")
    short = wire.encode_payload(buffers, False)[:-1]
    try:
        raw[wire.RAW_PUSH](short, timeout=timeout)
        fail("raw Push: a payload one byte short was accepted")
    except grpc.RpcError as e:
        expect(e.code() == grpc.StatusCode.DATA_LOSS, f"raw Push: a short payload is DATA_LOSS ({e.details()})")

    # --- serialized -------------------------------------------------------------------------------
    for validate in (False, True):
        message = pb.PayloadMessage(buffers=buffers)
        if validate:
            message.checksums.extend(wire.checksum(b) for b in buffers)
        echoed = data("Echo", pb.PayloadMessage)(message, timeout=timeout)
        expect(list(echoed.buffers) == buffers, f"serialized Echo (validate {validate})")
        ack = data("Push", pb.AckMessage)(message, timeout=timeout)
        expect(ack.bytes_received == total, f"serialized Push (validate {validate}): {ack.bytes_received} bytes")
        expect(list(ack.checksums) == ([wire.checksum(b) for b in buffers] if validate else []),
               f"serialized Push (validate {validate}): the PS's checksums")
    bad = pb.PayloadMessage(buffers=buffers, checksums=[wire.checksum(b) + 1 for b in buffers])
    try:
        data("Push", pb.AckMessage)(bad, timeout=timeout)
        fail("serialized Push: wrong checksums were accepted")
    except grpc.RpcError as e:
        expect(e.code() == grpc.StatusCode.DATA_LOSS, f"serialized Push: wrong checksums are DATA_LOSS")

    # --- exchange: the parameter store, one worker, synchronous SGD without momentum ----------
    init = [struct.pack("<4f", 1, 2, 3, 4), struct.pack("<2f", 5, 6)]
    grads = [struct.pack("<4f", 2, 2, 2, 2), struct.pack("<2f", 4, 4)]
    after = [struct.pack("<4f", 0, 1, 2, 3), struct.pack("<2f", 3, 4)]
    for serialized, run_id in ((False, 7001), (True, 7002)):
        def exchange(kind, step, tensors):
            header = wire.exchange_header(kind, 0, 1, step, True, 0.5, 0.0, len(tensors), run_id)
            request = [header] + tensors
            if serialized:
                reply = data("Exchange", pb.PayloadMessage)(
                    pb.PayloadMessage(buffers=request, checksums=[wire.checksum(b) for b in request]),
                    timeout=timeout)
                return list(reply.buffers)
            reply_buffers, sums = wire.decode_payload(raw[wire.RAW_EXCHANGE](
                wire.encode_payload(request, True), timeout=timeout))
            wire.check_sums(reply_buffers, sums)
            return reply_buffers

        mode = "serialized" if serialized else "raw"
        reply = exchange(1, 0, init)
        expect([bytes(b) for b in reply[1:]] == init, f"{mode} Exchange init: the PS holds the initial values")
        reply = exchange(2, 0, grads)
        expect([bytes(b) for b in reply[1:]] == after, f"{mode} Exchange step: w - lr g")
        header = wire.parse_exchange_header(reply[0])
        expect(header["updates_applied"] == 1, f"{mode} Exchange: updates applied {header['updates_applied']}")

    # --- sessions: one ended with a goodbye, one without ------------------------------------------
    get_info = control("GetInfo", pb.InfoRequest, pb.ServerInfo)
    lost = get_info(pb.InfoRequest(), timeout=timeout).sessions_lost
    control("Goodbye", pb.GoodbyeRequest, pb.GoodbyeReply)(pb.GoodbyeRequest(session_id=first.session_id),
                                                             timeout=timeout)
    session.cancel()
    other = channel.unary_stream("/psbench.wire.PsControl/Session",
                                 request_serializer=pb.SessionRequest.SerializeToString,
                                 response_deserializer=pb.SessionReply.FromString)(pb.SessionRequest())
    next(other)
    other.cancel()  # no goodbye: lost
    deadline = time.monotonic() + 10
    while get_info(pb.InfoRequest(), timeout=timeout).sessions_lost == lost and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the session with a goodbye, had it counted, would be in by now too
    info = get_info(pb.InfoRequest(), timeout=timeout)
    expect(info.sessions_lost == lost + 1,
           f"sessions: the one without a goodbye is lost, the one with is not ({info.sessions_lost - lost} lost)")
    # Data calls answered without error: 4 raw and 4 serialized echoes and pushes, 4 exchanges.
    expect(info.rpcs_served == 12, f"GetInfo: {info.rpcs_served} data calls served")


if __name__ == "__main__":
    main()
