"""Imported at the start of every Python the tests start (tests/offline.py puts this folder on
PYTHONPATH): a connection past loopback, or a name to look up that is not localhost, is refused and
written down in AGENT_TESTS_OFFLINE_LOG, so that the test that made it fails (issue #46)."""

import errno
import ipaddress
import os
import socket

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def loopback(host) -> bool:
    """Whether host (a name or an address, as a socket takes it) stays on this machine."""
    if isinstance(host, bytes | bytearray):
        host = host.decode(errors="replace")
    host = str(host or "").split("%")[0].strip("[]").lower()
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in LOOPBACK_NAMES


def numeric(host) -> bool:
    """Whether host is an address, which needs no lookup."""
    try:
        ipaddress.ip_address(str(host).split("%")[0].strip("[]"))
        return True
    except ValueError:
        return False


def refused(what: str) -> OSError:
    """The error a refused connection raises, after writing it down (best effort: a sandbox may
    not see the log)."""
    log = os.environ.get("AGENT_TESTS_OFFLINE_LOG")
    if log:
        try:
            with open(log, "a", encoding="utf-8") as file:
                file.write(f"{what} (pid {os.getpid()})\n")
        except OSError:
            pass
    return OSError(errno.ENETUNREACH, f"the tests run offline: {what} refused")


def install() -> None:
    """Guard socket.connect, connect_ex, sendto and getaddrinfo in this process."""
    if getattr(socket, "_offline", False):
        return
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex
    sendto = socket.socket.sendto
    getaddrinfo = socket.getaddrinfo

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address[0]):
            raise refused(f"a connection to {address[0]}:{address[1]}")

    def guarded_connect(self, address):
        check(self, address)
        return connect(self, address)

    def guarded_connect_ex(self, address):
        check(self, address)
        return connect_ex(self, address)

    def guarded_sendto(self, data, *rest):
        check(self, rest[-1])
        return sendto(self, data, *rest)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if not loopback(host) and not numeric(host):  # an address: connect() decides
            raise socket.gaierror(socket.EAI_NONAME, str(refused(f"looking up {host}")))
        return getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.socket.connect_ex = guarded_connect, guarded_connect_ex
    socket.socket.sendto, socket.getaddrinfo = guarded_sendto, guarded_getaddrinfo
    socket._offline = True


if os.environ.get("AGENT_TESTS_OFFLINE_LOG"):
    install()
