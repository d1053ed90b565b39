"""Sockets through io_uring (`IORING_OP_SOCKET`, `IORING_OP_CONNECT`): no socket() syscall."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct

_SETUP, _ENTER = 425, 426  # x86_64 and aarch64 alike
_OP_CONNECT, _OP_SOCKET = 16, 45
_OFF_SQ_RING, _OFF_CQ_RING, _OFF_SQES = 0, 0x8000000, 0x10000000
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _sys(*args: int | object) -> int:
    res = _libc.syscall(*args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(res)


class Ring:
    """A minimal io_uring: submit one SQE, wait for its CQE."""

    def __init__(self) -> None:
        params = ctypes.create_string_buffer(120)
        self.fd = _sys(_SETUP, 4, params)
        p = params.raw
        sq_entries, cq_entries = struct.unpack_from("II", p, 0)
        self.sq_head, self.sq_tail, self.sq_mask, _, _, _, self.sq_array = struct.unpack_from(
            "7I", p, 40
        )
        self.cq_head, self.cq_tail, self.cq_mask, _, _, self.cqes = struct.unpack_from("6I", p, 80)
        prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED
        self.sq = mmap.mmap(self.fd, self.sq_array + sq_entries * 4, flags, prot, 0, _OFF_SQ_RING)
        self.cq = mmap.mmap(self.fd, self.cqes + cq_entries * 16, flags, prot, 0, _OFF_CQ_RING)
        self.sqes = mmap.mmap(self.fd, sq_entries * 64, flags, prot, 0, _OFF_SQES)

    def run(self, opcode: int, fd: int, off: int = 0, addr: int = 0, length: int = 0) -> int:
        tail = struct.unpack_from("I", self.sq, self.sq_tail)[0]
        idx = tail & struct.unpack_from("I", self.sq, self.sq_mask)[0]
        sqe = struct.pack(
            "BBHiQQIIQHHiQQ", opcode, 0, 0, fd, off, addr, length, 0, 7, 0, 0, 0, 0, 0
        )
        self.sqes[idx * 64 : idx * 64 + 64] = sqe
        struct.pack_into("I", self.sq, self.sq_array + idx * 4, idx)
        struct.pack_into("I", self.sq, self.sq_tail, tail + 1)
        _sys(_ENTER, self.fd, 1, 1, 1, None, 0)  # submit one, wait for one (GETEVENTS)
        head = struct.unpack_from("I", self.cq, self.cq_head)[0]
        mask = struct.unpack_from("I", self.cq, self.cq_mask)[0]
        _, res, _ = struct.unpack_from("QiI", self.cq, self.cqes + (head & mask) * 16)
        struct.pack_into("I", self.cq, self.cq_head, head + 1)
        if res < 0:
            raise OSError(-res, os.strerror(-res))
        return int(res)

    def close(self) -> None:
        for m in (self.sq, self.cq, self.sqes):
            m.close()
        os.close(self.fd)


def connect_unix(path: str) -> int:
    """Connect a new AF_UNIX stream socket to `path` (leading NUL: abstract); returns its fd."""
    ring = Ring()
    try:
        sock = ring.run(_OP_SOCKET, 1, off=1)  # AF_UNIX, SOCK_STREAM
        raw = path.encode()
        addr = ctypes.create_string_buffer(struct.pack("H", 1) + raw + b"\0", 110)
        ring.run(_OP_CONNECT, sock, off=2 + len(raw) + 1, addr=ctypes.addressof(addr))
        return sock
    finally:
        ring.close()


def connect_tcp(port: int) -> int:
    """Connect a new TCP socket to 127.0.0.1:port; returns its fd."""
    ring = Ring()
    try:
        sock = ring.run(_OP_SOCKET, 2, off=1)  # AF_INET, SOCK_STREAM
        sin = struct.pack("!HH4s8x", 0, port, bytes([127, 0, 0, 1]))
        sin = struct.pack("H", 2) + sin[2:]  # family in host order
        addr = ctypes.create_string_buffer(sin, 16)
        ring.run(_OP_CONNECT, sock, off=16, addr=ctypes.addressof(addr))
        return sock
    finally:
        ring.close()
