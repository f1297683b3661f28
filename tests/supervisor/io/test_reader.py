"""receive_some: read first, wait only when nothing is there, and always checkpoint."""

from __future__ import annotations

import os

import pytest
import trio
import trio.lowlevel
import trio.testing

from assern.supervisor.io.reader import receive_some


def pipe() -> tuple[trio.lowlevel.FdStream, int]:
    read_fd, write_fd = os.pipe()
    return trio.lowlevel.FdStream(read_fd), write_fd


async def test_data_already_there_is_read_with_one_checkpoint() -> None:
    stream, write_fd = pipe()
    os.write(write_fd, b"one\n")
    with trio.testing.assert_checkpoints():
        assert await receive_some(stream, 100) == b"one\n"
    os.close(write_fd)
    await stream.aclose()


async def test_a_reader_waits_for_data_and_wakes_when_it_comes() -> None:
    stream, write_fd = pipe()
    got: list[bytes] = []

    async def read() -> None:
        got.append(await receive_some(stream, 100))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        os.write(write_fd, b"late\n")
    assert got == [b"late\n"]
    os.close(write_fd)
    await stream.aclose()


async def test_at_most_max_bytes_are_returned() -> None:
    stream, write_fd = pipe()
    os.write(write_fd, b"abcdef")
    assert await receive_some(stream, 4) == b"abcd"
    assert await receive_some(stream, 4) == b"ef"
    os.close(write_fd)
    await stream.aclose()


async def test_the_end_of_the_stream_reads_as_empty() -> None:
    stream, write_fd = pipe()
    os.close(write_fd)
    assert await receive_some(stream, 100) == b""
    await stream.aclose()


async def test_a_stream_closed_before_the_read_raises_closed() -> None:
    stream, write_fd = pipe()
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await receive_some(stream, 100)
    os.close(write_fd)


async def test_closing_the_stream_wakes_a_waiting_reader_with_closed() -> None:
    stream, write_fd = pipe()
    errors: list[BaseException] = []

    async def read() -> None:
        try:
            await receive_some(stream, 100)
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        await stream.aclose()
    assert len(errors) == 1
    os.close(write_fd)


async def test_a_waiting_read_can_be_cancelled() -> None:
    stream, write_fd = pipe()
    with trio.move_on_after(0.01) as scope:
        await receive_some(stream, 100)
    assert scope.cancelled_caught
    os.close(write_fd)
    await stream.aclose()


async def test_a_socket_stream_is_read_the_same_way() -> None:
    left, right = trio.socket.socketpair()
    stream = trio.SocketStream(left)
    await right.send(b"hello")
    with trio.testing.assert_checkpoints():
        assert await receive_some(stream, 100) == b"hello"
    right.close()
    assert await receive_some(stream, 100) == b""
    await stream.aclose()


async def test_a_stream_without_a_descriptor_is_read_through_its_own_method() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    await send.send_all(b"memory")
    assert await receive_some(receive, 100) == b"memory"
