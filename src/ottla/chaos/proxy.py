"""A fault proxy for one directed inter-node link: the connections one node opens to
another pass through it, so the harness can cut the link, delay it, slow it down or stall
one direction of it while the nodes run unchanged.

A link ``A -> B`` carries what A asks B (``forward``) and B's answers (``backward``) on
the connections A opens. A one-way partition "A cannot reach B" stalls ``forward`` on
``A -> B`` and ``backward`` on ``B -> A``: bytes are held, as TCP holds them while packets
are dropped, and flow again on heal unless an end gave up and closed the connection. A
cut closes every connection of the link and refuses new ones until healed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Literal, TypeVar

log = logging.getLogger(__name__)

Direction = Literal["forward", "backward"]
CHUNK = 65536
QUEUED_CHUNKS = 16
"""Chunks held per direction before the proxy stops reading (the sender then blocks)."""

T = TypeVar("T")


@dataclass
class LinkState:
    """The faults on a link now: all off is a healthy link."""

    cut: bool = False
    delay_s: float = 0.0
    rate_bytes_s: float | None = None
    stalled: set[Direction] = field(default_factory=set)

    def healthy(self) -> bool:
        return not (self.cut or self.delay_s or self.rate_bytes_s or self.stalled)


class LinkProxy:
    """Listens on 127.0.0.1 (``port``) and forwards each connection to ``target``."""

    def __init__(self, name: str, target: tuple[str, int], port: int = 0) -> None:
        self.name = name
        self.target = target
        self.port = port
        self.state = LinkState()
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing: dict[Direction, asyncio.Event] = {}

    async def start(self) -> LinkProxy:
        for direction in ("forward", "backward"):
            self._flowing[direction] = asyncio.Event()
            self._flowing[direction].set()
        await self._listen()
        return self

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._drop_connections()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _drop_connections(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def cut(self) -> None:
        """Close every connection and refuse new ones (nothing listens on the port)."""
        self.state.cut = True
        if self._server is not None:
            self._server.close()
            self._server = None
        self._drop_connections()

    def delay(self, seconds: float) -> None:
        """Hold every chunk ``seconds`` before passing it on, both ways, in order."""
        self.state.delay_s = seconds

    def slow(self, bytes_per_second: float | None) -> None:
        """Pass at most ``bytes_per_second`` each way (None: as fast as it comes)."""
        self.state.rate_bytes_s = bytes_per_second

    def stall(self, direction: Direction) -> None:
        """Hold the bytes going ``direction`` until healed: half of a one-way partition."""
        self.state.stalled.add(direction)
        self._flowing[direction].clear()

    async def heal(self) -> None:
        """Every fault off: listen again, pass everything held on."""
        was_cut = self.state.cut
        self.state = LinkState()
        for event in self._flowing.values():
            event.set()
        if was_cut and self._server is None:
            await self._listen()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        if self.state.cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()  # the node is down: so is the link
            return
        self.connections += 1
        self._writers.update((writer, up_writer))
        for args in ((reader, up_writer, "forward"), (up_reader, writer, "backward")):
            task = asyncio.create_task(self._pump(*args))  # type: ignore[arg-type]
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    direction: Direction) -> None:
        """Read on one side, hold each chunk as the link's faults say, write it on the
        other; when either side closes, close both."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUED_CHUNKS)
        sender = asyncio.create_task(self._send(queue, writer, direction))
        try:
            while chunk := await reader.read(CHUNK):
                await queue.put((time.monotonic() + self.state.delay_s, chunk))
            await queue.put((0.0, b""))
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            writer.transport.abort()
            self._writers.discard(writer)

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes]],
                    writer: asyncio.StreamWriter, direction: Direction) -> None:
        flowing = self._flowing[direction]
        while True:
            due, chunk = await queue.get()
            if not chunk:
                return
            await flowing.wait()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await flowing.wait()  # stalled while it was delayed
            writer.write(chunk)
            await writer.drain()
            rate = self.state.rate_bytes_s
            if rate:
                await asyncio.sleep(len(chunk) / rate)


class ProxyNetwork:
    """The proxies of a cluster on an event loop of their own thread, so blocking
    workload clients and the fault schedule can drive them: one ``LinkProxy`` per
    (source, destination, listener) and the faults over source -> destination."""

    def __init__(self) -> None:
        self.links: dict[tuple[int, int, str], LinkProxy] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy",
                                        daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[object, object, T]) -> T:
        """Run ``coroutine`` on the proxies' loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    def add(self, source: int, destination: int, listener: str, target: tuple[str, int],
            port: int = 0) -> int:
        """A proxy for ``source``'s connections to ``target`` on ``destination``, on
        ``port`` (0: any; a cut link listens again on it when healed): its port."""
        proxy = LinkProxy(f"{source}->{destination}/{listener}", target, port)
        self.run(proxy.start())
        self.links[source, destination, listener] = proxy
        return proxy.port

    def _between(self, source: int, destination: int) -> list[LinkProxy]:
        return [p for (s, d, _), p in self.links.items() if (s, d) == (source, destination)]

    def cut(self, a: int, b: int) -> None:
        """Cut both directed links between ``a`` and ``b``."""
        for proxy in self._between(a, b) + self._between(b, a):
            self.run(proxy.cut())

    def partition_one_way(self, source: int, destination: int) -> None:
        """``source`` can no longer reach ``destination``; the other way still works."""
        for proxy in self._between(source, destination):
            self._loop.call_soon_threadsafe(proxy.stall, "forward")
        for proxy in self._between(destination, source):
            self._loop.call_soon_threadsafe(proxy.stall, "backward")

    def delay(self, a: int, b: int, seconds: float) -> None:
        for proxy in self._between(a, b) + self._between(b, a):
            self._loop.call_soon_threadsafe(proxy.delay, seconds)

    def slow(self, a: int, b: int, bytes_per_second: float) -> None:
        for proxy in self._between(a, b) + self._between(b, a):
            self._loop.call_soon_threadsafe(proxy.slow, bytes_per_second)

    def heal(self) -> None:
        """Every fault on every link off."""
        for proxy in self.links.values():
            self.run(proxy.heal())

    def close(self) -> None:
        for proxy in self.links.values():
            with contextlib.suppress(Exception):
                self.run(proxy.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
