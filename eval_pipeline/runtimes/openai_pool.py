"""The ``openai:`` adapter's HTTP client (loaded with the SDK, when an openai runtime is built):
the SDK's own defaults, with an idle connection's "did the server close it?" check that costs
one ``poll``.

Every time a request starts or ends, the connection pool checks each idle keep-alive connection
for a server-side close (its socket readable). Through anyio each check rebuilds the stream's
table of attributes to find the socket: with a few dozen connections kept alive, a large share
of the client's CPU a turn. Here each connection's socket is looked up once, when
it is opened; the check itself (``is_socket_readable``) and every other path are unchanged.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpx2
import openai
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._utils import is_socket_readable  # the pool's own check, reused as it is
from openai._constants import DEFAULT_CONNECTION_LIMITS

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class _SocketKnownStream(AsyncNetworkStream):
    """A connection's stream whose raw socket was looked up once, when it was opened."""

    def __init__(self, stream: AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket: socket.socket | None = stream.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> AsyncNetworkStream:
        return _SocketKnownStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return is_socket_readable(self._socket)
        return self._stream.get_extra_info(info)


class _SocketKnownBackend(AsyncNetworkBackend):
    """The pool's own network backend, its streams wrapped in :class:`_SocketKnownStream`."""

    def __init__(self, backend: AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _SocketKnownStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return _SocketKnownStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def http_client() -> httpx2.AsyncClient:
    """The client the SDK would make itself (its timeout, connection limits, redirects; proxies
    from the environment), its direct connections' idle check by one ``poll`` each."""
    transport = httpx2.AsyncHTTPTransport(limits=DEFAULT_CONNECTION_LIMITS)
    # No public API: the transport makes its pool without a way to name the network backend.
    pool = getattr(transport, "_pool", None)
    if isinstance(getattr(pool, "_network_backend", None), AsyncNetworkBackend):
        pool._network_backend = _SocketKnownBackend(pool._network_backend)  # type: ignore[union-attr]
    return openai.DefaultAsyncHttpxClient(transport=transport)
