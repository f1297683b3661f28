"""DirectWriter: synchronous writes to a pipe, in order, queued when the pipe is full."""

from __future__ import annotations

import os

import pytest
import trio
import trio.lowlevel
import trio.testing

from assern.supervisor.io.writer import DirectWriter


def pipe() -> tuple[int, trio.lowlevel.FdStream]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    return read_fd, trio.lowlevel.FdStream(write_fd)


def drain(fd: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


async def test_a_write_reaches_the_pipe_at_once_without_the_pump() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    assert writer.write_nowait(b"one\n")
    await writer.write(b"two\n")
    assert drain(read_fd) == b"one\ntwo\n"
    os.close(read_fd)
    await stream.aclose()


async def test_a_full_pipe_queues_in_order_and_the_pump_drains_it() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    lines = [b"%06d" % i + b"x" * 1000 + b"\n" for i in range(400)]  # ~400 KB: more than a pipe holds
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.pump)
        for line in lines:
            assert writer.write_nowait(line)
        received = b""
        while len(received) < sum(map(len, lines)):
            received += drain(read_fd)
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert received == b"".join(lines)
    os.close(read_fd)
    await stream.aclose()


async def test_past_the_limit_a_synchronous_writer_is_refused_and_write_waits() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream, limit=10_000)
    big = b"y" * 100_000
    assert writer.write_nowait(big)  # fills the pipe; the rest waits in the queue
    assert not writer.write_nowait(b"refused\n")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.write, b"accepted\n")  # waits for room
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(writer.pump)
        received = b""
        while not received.endswith(b"accepted\n"):
            received += drain(read_fd)
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert received == big + b"accepted\n"
    os.close(read_fd)
    await stream.aclose()


async def test_a_stream_without_a_descriptor_goes_through_the_pump() -> None:
    send, receive = trio.testing.memory_stream_pair()
    writer = DirectWriter(send)
    assert writer.write_nowait(b"one\n")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.pump)
        await writer.write(b"two\n")
        received = b""
        while received != b"one\ntwo\n":
            received += await receive.receive_some()
        nursery.cancel_scope.cancel()


async def test_a_broken_pipe_refuses_writes_and_ends_the_pump() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    os.close(read_fd)
    assert not writer.write_nowait(b"lost\n")
    assert isinstance(writer.broken, BrokenPipeError)
    with pytest.raises(trio.BrokenResourceError):
        await writer.write(b"lost too\n")
    with trio.fail_after(5):
        await writer.pump()  # returns at once: nothing can be written any more
    await stream.aclose()


async def test_the_pump_notices_a_pipe_that_breaks_while_it_waits() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    assert writer.write_nowait(b"z" * 200_000)  # the rest is queued for the pump

    async def close_reader_once_the_pump_waits() -> None:
        await trio.testing.wait_all_tasks_blocked()
        os.close(read_fd)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_reader_once_the_pump_waits)
        with trio.fail_after(5):
            await writer.pump()  # returns once the pipe broke
    assert writer.broken is not None
    assert not writer.write_nowait(b"after\n")
    await stream.aclose()


async def test_drain_returns_once_the_queue_is_out() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    big = b"q" * 300_000  # more than the pipe holds: the rest waits in the queue
    assert writer.write_nowait(big)
    received = bytearray()
    drained = False

    async def read_slowly() -> None:
        while len(received) < len(big):
            received.extend(drain(read_fd))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.pump)
        await trio.testing.wait_all_tasks_blocked()
        assert received == b""  # nobody read yet: drain could not have returned
        nursery.start_soon(read_slowly)
        with trio.fail_after(5):
            await writer.drain()
        drained = True
        nursery.cancel_scope.cancel()
    assert drained
    received.extend(drain(read_fd))
    assert bytes(received) == big
    os.close(read_fd)
    await stream.aclose()


async def test_drain_with_nothing_queued_returns_at_once() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    assert writer.write_nowait(b"small\n")
    with trio.testing.assert_checkpoints(), trio.fail_after(1):
        await writer.drain()
    os.close(read_fd)
    await stream.aclose()


async def test_drain_returns_when_the_other_side_goes_away() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    assert writer.write_nowait(b"w" * 300_000)

    async def close_reader() -> None:
        await trio.testing.wait_all_tasks_blocked()
        os.close(read_fd)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.pump)
        nursery.start_soon(close_reader)
        with trio.fail_after(5):
            await writer.drain()
        nursery.cancel_scope.cancel()
    assert writer.broken is not None
    await stream.aclose()


async def test_after_its_stream_closed_nothing_reaches_a_file_that_reused_its_number() -> None:
    read_fd, stream = pipe()
    writer = DirectWriter(stream)
    number = stream.fileno()
    await stream.aclose()
    os.close(read_fd)
    other_read, other_write = os.pipe()  # the lowest free numbers: the closed ones again
    try:
        assert number in (other_read, other_write)
        os.set_blocking(other_read, False)
        assert not writer.write_nowait(b"stray\n")
        assert writer.broken is not None
        assert drain(other_read) == b""
    finally:
        os.close(other_read)
        os.close(other_write)
