"""Webhook receivers that misbehave, for real, on 127.0.0.1: each reads the request (headers and
body) and answers as its behaviour says. The notify tests and the fuzz suite post to them."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Served:
    url: str
    requests: list[bytes] = field(default_factory=list)  # each request's head and body
    bytes_sent: int = 0  # what the behaviours wrote before the client went away


Behaviour = Callable[[socket.socket, Served], None]


@contextmanager
def hostile_receiver(behaviour: Behaviour) -> Iterator[Served]:
    """A receiver on a free port of 127.0.0.1 answering every connection with ``behaviour``."""
    listener = socket.create_server(("127.0.0.1", 0))
    served = Served(url=f"http://127.0.0.1:{listener.getsockname()[1]}/hook/s3cr3t-path")
    stopping = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                served.requests.append(read_request(conn))
                behaviour(conn, served)
            except OSError:
                pass  # the client hung up: what a bounded client does

    def accept() -> None:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        stopping.set()
        listener.close()


def read_request(conn: socket.socket) -> bytes:
    """One HTTP request off ``conn``: its head and its body (as long as Content-Length says)."""
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def send(conn: socket.socket, served: Served, data: bytes) -> None:
    conn.sendall(data)
    served.bytes_sent += len(data)


def redirect_to(location: str, status: int = 302) -> Behaviour:
    def behaviour(conn: socket.socket, served: Served) -> None:
        send(
            conn,
            served,
            f"HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode(),
        )

    return behaviour


def huge_body(length: int) -> Behaviour:
    """200 with a body of ``length`` bytes, sent until the client stops reading."""

    def behaviour(conn: socket.socket, served: Served) -> None:
        send(conn, served, f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n".encode())
        block = b"x" * (1 << 20)
        while served.bytes_sent < length:
            send(conn, served, block)

    return behaviour


def drip(every_s: float, data: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") -> Behaviour:
    """An answer one byte at a time, ``every_s`` apart: each read gets a byte in time."""

    def behaviour(conn: socket.socket, served: Served) -> None:
        for index in range(len(data)):
            send(conn, served, data[index : index + 1])
            time.sleep(every_s)

    return behaviour


def answer(data: bytes) -> Behaviour:
    """These bytes, whatever they are, then hang up."""

    def behaviour(conn: socket.socket, served: Served) -> None:
        send(conn, served, data)

    return behaviour


def endless(head: bytes, block: bytes) -> Behaviour:
    """``head``, then ``block`` again and again until the client stops reading."""

    def behaviour(conn: socket.socket, served: Served) -> None:
        send(conn, served, head)
        while True:
            send(conn, served, block)

    return behaviour


def silence(conn: socket.socket, served: Served) -> None:
    """Never a byte: the connection stays open until the client gives up."""
    conn.settimeout(120)
    conn.recv(1)


def echo_request(conn: socket.socket, served: Served) -> None:
    """A 400 whose reason phrase and body are the request line and an escape sequence: what
    the client prints of an answer must not quote the URL nor drive the terminal."""
    line = served.requests[-1].split(b"\r\n", 1)[0]
    body = line + b"\x1b[2J" + served.url.encode()
    send(conn, served, b"HTTP/1.1 400 " + line + b"\x1b[31m\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
