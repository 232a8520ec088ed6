"""The packet-capture process: kernel arrival stamps of the engine's segments, to a file.

Run as ``python -m pytest_goodput.load.client.capture_process PORT FILE`` by
:class:`pytest_goodput.load.selfcheck.capture.PacketCapture`, in its own process so that it is not
starved together with the client's event loop (it also asks for a raised priority). An
``AF_PACKET`` socket (every interface, ``SOCK_DGRAM``: records start at the network header)
with a classic BPF filter (``SO_ATTACH_FILTER``) keeps only incoming TCP segments from the
engine's port, cut to their headers; a second one keeps the client's outgoing segments to
that port (requests' departures); ``SO_TIMESTAMPNS`` gives each its kernel arrival time
(CLOCK_REALTIME), however late it is read. Each segment becomes one record
(``measure.records.packets.RECORD``); when standard input closes, the process drains what the
kernel still holds, prints its packet and drop counts (JSON) and exits. Kept free of the
package's heavier imports: it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import socket
import struct
import sys
import time
from typing import BinaryIO

from pytest_goodput.measure.records.packets import RECORD

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_RCVBUFFORCE = 33
SOL_PACKET, PACKET_STATISTICS = 263, 6
PACKET_OUTGOING = 4
#: Bytes kept of each segment: an IPv4 header with options and a TCP header with options.
SNAP_BYTES = 120
#: The capture socket's receive buffer: segments wait here while the capture is starved.
RCVBUF_BYTES = 64 << 20
#: Priority raise asked for the capture process (a nice value of -10; silently not granted
#: without CAP_SYS_NICE): a capture that keeps up drops nothing.
CAPTURE_PRIORITY = -10


def bpf_program(port: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF: incoming IPv4/IPv6 TCP segments (not fragments) from ``port``, cut short.

    Offsets are from the network header (``SOCK_DGRAM`` packet socket).
    """
    return [
        (0x20, 0, 0, 0xFFFFF004),  # A = packet type (SKF_AD_PKTTYPE)
        (0x15, 16, 0, PACKET_OUTGOING),  # outgoing copy -> drop
        (0x30, 0, 0, 0),  # A = byte 0
        (0x74, 0, 0, 4),  # A >>= 4: IP version
        (0x15, 0, 4, 6),  # IPv6? else -> IPv4 check
        (0x30, 0, 0, 6),  # A = next header
        (0x15, 0, 11, 6),  # TCP? else drop
        (0x01, 0, 0, 40),  # X = 40 (TCP header offset)
        (0x05, 0, 0, 6),  # -> load source port
        (0x15, 0, 8, 4),  # IPv4? else drop
        (0x30, 0, 0, 9),  # A = protocol
        (0x15, 0, 6, 6),  # TCP? else drop
        (0x28, 0, 0, 6),  # A = flags + fragment offset
        (0x45, 4, 0, 0x1FFF),  # a later fragment -> drop
        (0xB1, 0, 0, 0),  # X = IPv4 header length
        (0x48, 0, 0, 0),  # A = source port
        (0x15, 0, 1, port),  # the engine's port? else drop
        (0x06, 0, 0, SNAP_BYTES),  # keep the headers
        (0x06, 0, 0, 0),  # drop
    ]


def departures_program(port: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF: the client's outgoing IPv4/IPv6 TCP segments to ``port``, cut short.

    The same program as :func:`bpf_program` with the packet-type test inverted (outgoing
    copies only: on loopback each segment also shows as incoming, and a remote engine's are
    only outgoing) and the destination port tested: a request's departure."""
    prog = bpf_program(port)
    prog[1] = (0x15, 0, 16, PACKET_OUTGOING)  # not outgoing -> drop
    prog[15] = (0x48, 0, 0, 2)  # A = destination port
    return prog


def open_socket() -> socket.socket:
    """A packet socket on every interface; ``PermissionError`` without CAP_NET_RAW."""
    if not hasattr(socket, "AF_PACKET"):
        raise OSError("packet sockets (AF_PACKET) exist on Linux only")
    return socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))


def _attach_filter(sock: socket.socket, prog: list[tuple[int, int, int, int]]) -> None:
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in prog))
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def _drain(sock: socket.socket, out: BinaryIO, outgoing: bool = False) -> int:
    """Read every packet the kernel holds; write the incoming ones (``outgoing``: the outgoing
    ones). Returns how many."""
    n = 0
    space = socket.CMSG_SPACE(16)
    write = out.write
    while True:
        try:
            data, anc, _flags, addr = sock.recvmsg(SNAP_BYTES, space, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return n
        if (addr[2] == PACKET_OUTGOING) != outgoing:
            continue
        t_ns = time.time_ns()  # only when the kernel gave no stamp
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                sec, nsec = struct.unpack_from("qq", value)
                t_ns = sec * 1_000_000_000 + nsec
        write(RECORD.pack(t_ns, addr[1], len(data)))
        write(data)
        n += 1


def _socket(prog: list[tuple[int, int, int, int]]) -> socket.socket:
    """A stamped packet socket with ``prog`` attached and a large buffer, emptied of what it
    caught before the filter was on."""
    sock = open_socket()
    try:
        _attach_filter(sock, prog)
    except OSError:
        pass  # the parent's parser filters as well
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    outgoing = prog[1][2] == 0  # departures_program: only outgoing copies pass
    _drain(sock, open(os.devnull, "wb"), outgoing=outgoing)
    return sock


def main(argv: list[str]) -> int:
    """``PORT FILE``; prints READY, captures until stdin closes."""
    port, path = int(argv[0]), argv[1]
    sock, dep = _socket(bpf_program(port)), _socket(departures_program(port))
    try:
        os.setpriority(os.PRIO_PROCESS, 0, CAPTURE_PRIORITY)
    except OSError:
        pass
    count = 0
    with open(path, "wb", buffering=1 << 20) as out:
        print("READY", flush=True)
        while True:
            ready, _, _ = select.select([sock, dep, sys.stdin], [], [], 0.5)
            if sock in ready:
                count += _drain(sock, out)
            if dep in ready:
                count += _drain(dep, out, outgoing=True)
            if sys.stdin in ready and not sys.stdin.buffer.read1(4096):
                count += _drain(sock, out) + _drain(dep, out, outgoing=True)
                break
    packets = drops = 0
    for one in (sock, dep):
        got, lost = struct.unpack("II", one.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        packets, drops = packets + got, drops + lost
    print(json.dumps({"written": count, "kernel_packets": packets, "dropped": drops,
                      "cpu_s": round(time.process_time(), 4)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
