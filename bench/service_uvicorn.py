"""``python -m uvicorn`` with TCP_NODELAY on every connection, ``--workers`` included.

With ``--workers N`` uvicorn binds the listening socket itself as ``socket.socket(family)``,
protocol 0; asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP, so every
connection the workers accept keeps Nagle's algorithm on, and a keep-alive response written in
two pieces (headers, then body) waits for the client's delayed ACK: ≈ 44 ms per request on
Linux loopback, whatever the app does (measured: 22 req/s on one connection against a bare JSON
endpoint). One worker is not affected (asyncio binds that socket from getaddrinfo). Deployments
running ``uvicorn --workers`` should do the same or run behind a proxy that pools connections.

    python bench/service_uvicorn.py app.main:create_app --factory --workers 2 --port 8000
"""

from __future__ import annotations

import socket
import sys

import uvicorn.config
import uvicorn.main

_bind_socket = uvicorn.config.Config.bind_socket


def bind_socket(self: uvicorn.config.Config) -> socket.socket:
    sock = _bind_socket(self)
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
        sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        sock.set_inheritable(True)
    return sock


uvicorn.config.Config.bind_socket = bind_socket  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(uvicorn.main.main())
