"""HTTP/1.1 by hand, for tests that need what a client library will not
send: a body in chunks that keeps coming after the answer, a head cut short."""

from __future__ import annotations

import select
import socket

#: How long a test waits for something the server must do by itself:
#: generous, never a speed bound.
PATIENCE = 60


def head(method: str, path: str, port: int, *lines: str) -> bytes:
    return "\r\n".join(
        [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *lines, "", ""]
    ).encode()


def send_chunked(port: int, path: str, total: int, *lines: str, first: bytes = b"") -> str:
    """POST ``first`` then ``total`` bytes of ``a`` to ``path`` in 64 KiB chunks
    (no Content-Length), reading the answer as soon as one comes; the answer
    (maybe empty)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    answer = b""
    try:
        conn.sendall(head("POST", path, port, "Transfer-Encoding: chunked", *lines))
        if first:
            conn.sendall(b"%x\r\n" % len(first) + first + b"\r\n")
        chunk = b"%x\r\n" % (64 * 1024) + b"a" * (64 * 1024) + b"\r\n"
        sent = 0
        while sent < total and b"\r\n\r\n" not in answer:
            try:
                conn.sendall(chunk)
            except OSError:
                break  # the server stopped reading and closed: its answer is waiting
            sent += 64 * 1024
            while select.select([conn], [], [], 0)[0]:
                data = conn.recv(65536)
                if not data:
                    break
                answer += data
        conn.settimeout(PATIENCE)
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                break
            if not data:
                break
            answer += data
    finally:
        conn.close()
    return answer.decode("latin-1")


def get(port: int, path: str, *lines: str) -> str:
    """A whole GET on a connection of its own: the answer."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    with conn:
        conn.sendall(head("GET", path, port, *lines, "Connection: close"))
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data.decode("latin-1")


def status_of(answer: str) -> int:
    assert answer.startswith("HTTP/1.1 "), answer[:300]
    return int(answer.split()[1])
