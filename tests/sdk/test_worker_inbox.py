"""The worker's end of the bridge (`lineup_sdk._worker._Inbox`): whole lines handed on as
they arrive, however the pipe splits them; a line over `MAX_MESSAGE` ends the worker (4);
the end of the pipe ends it cleanly (0); both ends read the pipe in small chunks."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from lineup_sdk._worker import _Inbox
from lineup_sdk.bridge import MAX_MESSAGE, READ_CHUNK, connect_lines


def _inbox() -> tuple[_Inbox, list[bytes], asyncio.Future[int]]:
    loop = asyncio.new_event_loop()
    loop.close()  # futures need a loop to belong to, never a running one here
    ended: asyncio.Future[int] = loop.create_future()
    inbox = _Inbox(ended)
    seen: list[bytes] = []
    inbox.on_line = seen.append
    return inbox, seen, ended


def test_lines_split_across_reads_arrive_whole_and_in_order() -> None:
    inbox, seen, ended = _inbox()
    inbox.data_received(b'{"t":"ping","id":1}\n{"t":"pi')
    inbox.data_received(b'ng","id":2}\n')
    assert seen == [b'{"t":"ping","id":1}\n', b'{"t":"ping","id":2}\n']
    assert not ended.done()
    inbox.eof_received()
    assert ended.result() == 0


def test_a_line_over_the_limit_ends_the_worker() -> None:
    inbox, seen, ended = _inbox()
    inbox.data_received(b"x" * (MAX_MESSAGE + 1))  # no newline, already too long
    assert ended.result() == 4
    assert seen == []


def test_lines_before_the_entry_imported_are_kept_for_later() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    ended: asyncio.Future[int] = loop.create_future()
    inbox = _Inbox(ended)
    inbox.data_received(b'{"t":"ping","id":1}\n')
    seen: list[bytes] = []
    inbox.on_line = seen.append
    inbox._flush_early()
    assert seen == [b'{"t":"ping","id":1}\n']


def test_bridge_pipes_are_read_in_chunks_under_the_mmap_threshold(monkeypatch: Any) -> None:
    """Both ends read the bridge `READ_CHUNK` bytes at a time: asyncio's own 256 KiB read
    maps, shrinks and unmaps a fresh buffer for every message (glibc serves that size
    with mmap), about 18 µs a delivery."""
    asked: list[int] = []
    real_read = os.read

    def spy(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    async def main() -> list[bytes]:
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[int] = loop.create_future()
        inbox = _Inbox(ended)
        seen: list[bytes] = []
        inbox.on_line = seen.append
        rfd, wfd = os.pipe()
        transport, protocol = await connect_lines(loop, lambda: inbox, rfd)
        assert protocol is inbox
        os.write(wfd, b'{"t":"ping","id":1}\n')
        os.close(wfd)
        assert await ended == 0  # the end of the pipe ends it
        transport.close()
        return seen

    monkeypatch.setattr(os, "read", spy)
    assert asyncio.run(main()) == [b'{"t":"ping","id":1}\n']
    assert asked and set(asked) == {READ_CHUNK}
    assert READ_CHUNK < 128 * 1024  # glibc's default mmap threshold
