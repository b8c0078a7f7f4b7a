"""Starts agent.py as `python agent.py ...` does, but forked from a process that has already
imported the SDK, so that a test does not wait the 0.6 s of `import openai` each time.

A test still gets a real `subprocess.Popen`: of a relay (`python -I -S relay.py`, tests/relay.py),
which hands its standard streams, arguments, environment, folder and umask to the server, passes
on every signal it is sent, and exits as the agent did. The agent itself runs in a fork of the
server, with its streams, environment, signals and `__main__` set up as the interpreter sets them
at start. With AGENT_TESTS_SPAWN=1 every test starts agent.py itself; CI runs the suite both ways.

Only on Linux (pidfd_open); elsewhere, and for what only a fresh interpreter shows (its own
memory, a Ctrl-C while it imports, other PYTHON* settings), `command()` leaves the command as it is.
"""

import atexit
import contextlib
import gc
import io
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from relay import FORWARDED

HERE = Path(__file__).resolve()
RELAY = HERE.parent / "relay.py"
UNBUFFERED = bool(os.environ.get("PYTHONUNBUFFERED"))  # -u, read as the server starts
_server: dict = {}


def command(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The command to start instead of argv ([sys.executable, script or -m, ...]): the relay,
    unless AGENT_TESTS_SPAWN is set."""
    return argv if os.environ.get("AGENT_TESTS_SPAWN") else relayed(argv, env)


def start_with(env: dict[str, str]) -> None:
    """The interpreter settings (PYTHON* variables) the server is to start with: env's. A program
    to be started with others is started, not forked. Unset, they are those of the first program
    a test starts, whichever test comes first."""
    _server["python"] = {k: v for k, v in env.items() if k.startswith("PYTHON")}


def relayed(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The relay's command for argv, when the fork server can run it as the interpreter would;
    argv itself when it cannot."""
    env = os.environ if env is None else env
    python = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    usable = hasattr(os, "pidfd_open") and argv[0] == sys.executable
    if not usable or (argv[1].startswith("-") and argv[1] != "-m"):
        return argv
    if _server.setdefault("python", python) != python:
        return argv  # the interpreter would start with other settings than the server's
    return [sys.executable, "-I", "-S", str(RELAY), address(), *argv[1:]]


def address() -> str:
    """The server's socket, started on first use; it ends when this process does."""
    if "path" not in _server:
        folder = tempfile.mkdtemp(prefix="forkserver-")
        path = os.path.join(folder, "socket")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        process = subprocess.Popen(
            [sys.executable, str(HERE), "serve", path],
            env={**env, **_server["python"]},
            stdin=subprocess.PIPE,  # its end of file tells the server to go
            stdout=subprocess.PIPE,
        )
        assert process.stdout.readline() == b"ready\n", "the fork server did not start"
        _server.update(process=process, path=path)
        atexit.register(process.stdin.close)
    return _server["path"]


# The server.


def serve(path: str) -> None:
    """Import what agent.py imports from outside the project, then fork one agent a connection."""
    import dotenv  # noqa: F401

    first_requests()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped by the kernel
    # What the server holds now is never garbage: a fork's collections leave it out, and so do not
    # read, or copy, every object the SDK made (6% of the CPU of the tests that start agent.py).
    gc.freeze()
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:
            return
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            wait_for_agent(connection)
        connection.close()


def first_requests() -> None:
    """A request and a streamed one, to a scripted server of this process's own, so that what the
    SDK does only at the first (it imports its HTTP transport and its chat resources, and builds the
    validators of the types it reads a reply into) is done once, not in every fork. Its threads
    have ended when this returns: a fork has only the thread that forked."""
    import openai
    from scripted_server import ScriptedServer, Stream, call, reply

    server = ScriptedServer()
    answer = reply("hi", tool_calls=[call("read_file", {"path": "a"})])
    server.add(answer, Stream(answer))
    hi = [{"role": "user", "content": "hi"}]
    try:
        with openai.OpenAI(api_key="-", base_url=server.url) as client:
            client.chat.completions.create(model="m", messages=hi)
            for _ in client.chat.completions.create(model="m", messages=hi, stream=True):
                pass
    finally:
        server.close()


def wait_for_agent(connection: socket.socket) -> None:
    """In a fork of the server: fork the agent, tell the relay its pid, then its exit status. The
    relay gone (killed) ends the agent."""
    header, fds = receive(connection)
    pid = os.fork()
    if pid == 0:
        connection.close()
        become_agent(header, fds)
    for fd in fds:
        os.close(fd)
    connection.sendall(f"pid {pid}\n".encode())
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([connection, pidfd], [], [])
    if pidfd not in ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    try:
        connection.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        os._exit(0)


def receive(connection: socket.socket) -> tuple[dict, list[int]]:
    """The relay's header (its length in 4 bytes, then marshal's bytes) and its three standard
    streams."""
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    size = int.from_bytes(data[:4], "big")
    data = data[4:]
    while len(data) < size:
        data += connection.recv(size - len(data))
    return marshal.loads(data), fds


def become_agent(header: dict, fds: list[int]) -> None:
    """Set this process up as the interpreter sets up `python ARGS`, run it, exit as it would."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.umask(header["umask"])
    os.chdir(header["cwd"])
    os.environ.clear()
    os.environ.update(header["env"])
    tempfile.tempdir = None
    for number in (*FORWARDED, signal.SIGCHLD, signal.SIGUSR2):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in header.get("ignored", []):  # as they came to the relay: a background job's
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    sys.stdin, sys.stdout, sys.stderr = (standard_stream(fd) for fd in (0, 1, 2))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os._exit(exit_status(header["argv"]))


def standard_stream(fd: int) -> io.TextIOWrapper:
    """sys.stdin, sys.stdout or sys.stderr as the interpreter makes them (create_stdio() in
    CPython's Python/pylifecycle.c), in UTF-8 mode."""
    mode, buffered = ("r" if fd == 0 else "w"), not UNBUFFERED
    binary = open(fd, mode + "b", buffering=-1 if buffered or fd == 0 else 0, closefd=False)  # noqa: SIM115
    getattr(binary, "raw", binary).name = ("<stdin>", "<stdout>", "<stderr>")[fd]
    stream = io.TextIOWrapper(
        binary,
        encoding="utf-8",
        errors="backslashreplace" if fd == 2 else "surrogateescape",
        newline="\n",
        line_buffering=buffered and (fd == 2 or os.isatty(fd)),
        write_through=not buffered,
    )
    stream.mode = mode
    return stream


def exit_status(argv: list[str]) -> int:
    """Run `python argv` in this process: a script, or `-m module`; the status it exits with."""
    import runpy
    import threading

    code, script = 0, argv[0] != "-m"
    try:
        if script:
            sys.argv, sys.path[0] = argv, os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
        else:
            sys.argv, sys.path[0] = argv[1:], os.getcwd()
            runpy._run_module_as_main(argv[1])
    except SystemExit as done:
        code = system_exit_status(done.code)
    except BaseException as error:  # noqa: BLE001 - the interpreter prints any exception
        error = error.with_traceback(own_frames(error.__traceback__, script))
        sys.excepthook(type(error), error, error.__traceback__)
        code = -signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1
    threading._shutdown()
    atexit._run_exitfuncs()
    code = flushed(code)
    if code == -signal.SIGINT:  # the interpreter ends itself by SIGINT, as a shell expects
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def own_frames(frames, script: bool):
    """A traceback from the program's first frame: without this file's, or runpy's for a script
    (`python -m` shows runpy's)."""
    while frames and (
        frames.tb_frame.f_code.co_filename == __file__
        or (script and "runpy" in frames.tb_frame.f_code.co_filename)
    ):
        frames = frames.tb_next
    return frames


def system_exit_status(code) -> int:
    """The status of `raise SystemExit(code)`: a number as it is, anything else printed, 1."""
    if code is None or isinstance(code, int):
        return (code or 0) & 0xFF
    print(code, file=sys.stderr)
    return 1


def flushed(code: int) -> int:
    """Flush stdout and stderr as the interpreter does at exit: stdout failing is status 120."""
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - the interpreter reports it and exits 120
        print("Exception ignored on flushing sys.stdout:", file=sys.stderr)
        code = 120 if code >= 0 else code
    with contextlib.suppress(Exception):  # as the interpreter does
        sys.stderr.flush()
    return code


if __name__ == "__main__":
    serve(sys.argv[2])
