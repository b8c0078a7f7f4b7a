"""The relay of tests/forkserver.py: `python -I -S relay.py SOCKET ARGS...` stands for
`python ARGS...`. It hands its standard streams, arguments, environment, folder and umask to the
fork server, passes on every signal it is sent, and exits as the agent the server forked for it
did.

A relay starts for every process a test starts, so it imports only modules an interpreter has
loaded already or builds in: `socket`, `signal`, `struct` and `json` would import `enum` and `re`
and more than double the relay's time (about 15 ms of CPU each start)."""

import _signal
import _socket
import marshal
import os
import sys

FORWARDED = [_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1]


def relay(path: str, argv: list[str]) -> None:
    """Hand this process's streams, arguments and environment to the server; pass signals on;
    exit as the agent does."""
    agent: list[int] = []
    pending: list[int] = []
    # what a new interpreter would keep ignored (a background job starts with SIGINT and SIGQUIT
    # ignored), before this relay takes the signals to pass them on
    ignored = [n for n in FORWARDED if _signal.getsignal(n) == _signal.SIG_IGN]

    def pass_on(number, _frame):
        if agent:
            os.kill(agent[0], number)
        else:
            pending.append(number)

    for number in FORWARDED:
        _signal.signal(number, pass_on)
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    connection.connect(path)
    umask = os.umask(0)
    os.umask(umask)
    header = {
        "argv": argv,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": umask,
        "ignored": ignored,
    }
    send(connection, marshal.dumps(header), [0, 1, 2])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the agent alone holds the streams, so their ends come when it ends
        os.dup2(null, fd)
    lines = Lines(connection)
    agent.append(int(lines.next().split()[1]))
    for number in pending:
        os.kill(agent[0], number)
    line = lines.next()
    code = int(line.split()[1]) if line else -_signal.SIGKILL
    if code < 0:
        _signal.signal(-code, _signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def send(connection, header: bytes, fds: list[int]) -> None:
    """The header, after its length in 4 bytes, with the file descriptors fds
    (socket.send_fds(), then the rest of a long header)."""
    data = len(header).to_bytes(4, "big") + header
    rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)  # C ints
    sent = connection.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    connection.sendall(data[sent:])


class Lines:
    """The lines the server sends, one at a time; b"" at its end."""

    def __init__(self, connection):
        self.connection, self.received = connection, b""

    def next(self) -> bytes:
        while b"\n" not in self.received:
            chunk = self.connection.recv(256)
            if not chunk:
                return b""
            self.received += chunk
        line, _, self.received = self.received.partition(b"\n")
        return line


if __name__ == "__main__":
    relay(sys.argv[1], sys.argv[2:])
