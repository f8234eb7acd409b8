"""``python -m uvicorn`` with TCP_NODELAY on every connection and, with ``--workers``, one
listening socket per worker (SO_REUSEPORT).

TCP_NODELAY: with ``--workers N`` uvicorn binds the listening socket itself as
``socket.socket(family)``, protocol 0; asyncio sets TCP_NODELAY only on sockets whose protocol is
IPPROTO_TCP, so every connection the workers accept keeps Nagle's algorithm on, and a keep-alive
response written in two pieces (headers, then body) waits for the client's delayed ACK: ≈ 44 ms
per request on Linux loopback, whatever the app does (measured: 22 req/s on one connection
against a bare JSON endpoint). One worker is not affected (asyncio binds that socket from
getaddrinfo).

One socket per worker: uvicorn's workers share the supervisor's socket, and asyncio accepts up
to ``--backlog`` (2048) pending connections each time the socket wakes a worker, so when wrk
opens its 64 connections at once the first worker awake often takes most of them and keeps them
for the whole phase (seen: a 2-worker question phase at 100 % server CPU, one worker idle, and
its ratio halved). Here the supervisor's socket is only bound (SO_REUSEPORT, never listening)
and each worker listens on its own socket bound to the same address: the kernel spreads new
connections over the workers' sockets by a hash of their addresses. Both sides of every ratio
are served this way. Deployments running ``uvicorn --workers`` behind a proxy that keeps a few
long-lived connections can see the same imbalance; see the README's deployment section.

    python bench/service_uvicorn.py app.main:create_app --factory --workers 2 --port 8000
"""

from __future__ import annotations

import socket
import sys

import uvicorn.config
import uvicorn.main
import uvicorn.server

_bind_socket = uvicorn.config.Config.bind_socket
_startup = uvicorn.server.Server.startup
_INET = (socket.AF_INET, socket.AF_INET6)


def _reuse_port_socket(family: socket.AddressFamily, address: tuple[object, ...]) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def bind_socket(self: uvicorn.config.Config) -> socket.socket:
    if self.workers > 1 and self.uds is None and self.fd is None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = _reuse_port_socket(family, (self.host, self.port))
        sock.set_inheritable(True)
        return sock
    sock = _bind_socket(self)
    if sock.family in _INET and sock.proto == 0:
        sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        sock.set_inheritable(True)
    return sock


async def startup(self: uvicorn.server.Server, sockets: list[socket.socket] | None = None) -> None:
    """In a worker (given the supervisor's sockets): listen on a socket of its own instead."""
    if sockets is not None:
        own = []
        for sock in sockets:
            if sock.family in _INET and sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT):
                mine = _reuse_port_socket(sock.family, sock.getsockname())
                sock.close()
                own.append(mine)
            else:
                own.append(sock)
        sockets = own
    await _startup(self, sockets=sockets)


uvicorn.config.Config.bind_socket = bind_socket  # type: ignore[method-assign]
uvicorn.server.Server.startup = startup  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(uvicorn.main.main())
