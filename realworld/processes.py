"""Processes: a command's output read as it comes, and no command outliving its limits.

commands.run() (run_shell's body) starts each command in a process group of its own; what the
command starts, also what leaves that group (setsid, nohup), is found here through the child
subreaper and /proc, and ended.
"""

import codecs
import contextlib
import ctypes
import functools
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from realworld.guards import credentials, joined

KILL_GRACE = 5  # seconds to collect the output of a killed command
CHECK = 0.05  # seconds between two looks at whether a command that prints nothing has ended
SECRET_NAMES = ("AGENT_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")


class Capture:
    """A command's output as it comes: its first and last characters, and how many there
    were in all."""

    def __init__(self, limit: int):
        self.limit, self.head, self.tail, self.count = limit, "", "", 0
        self.ended, self.reader = False, None  # the end of the output read; a thread reading it
        # output may be in any encoding
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read_all(self, pipe) -> None:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            self.add(self.decoder.decode(chunk))
        self.add(self.decoder.decode(b"", final=True))
        self.ended = True

    def read_on(self, pipe) -> None:
        """Read the rest of pipe by a thread of its own (self.reader), so that whatever writes to
        it never waits on a full pipe."""
        self.reader = threading.Thread(target=self.read_all, args=(pipe,), daemon=True)
        self.reader.start()

    def read_some(self, pipe, seconds: float) -> bool:
        """Read what comes within seconds, at most one chunk; whether the output may go on."""
        waiting = select.poll()  # not select.select(): it takes no descriptor past 1023
        waiting.register(pipe, select.POLLIN)
        return not waiting.poll(max(0.0, seconds) * 1000) or self.read_chunk(pipe)

    def read_chunk(self, pipe) -> bool:
        """Read one chunk of what pipe holds now (poll() said so); whether the output may go on."""
        chunk = os.read(pipe.fileno(), 65536)
        self.add(self.decoder.decode(chunk, final=not chunk))
        self.ended = not chunk
        return bool(chunk)

    def add(self, text: str) -> None:
        self.count += len(text)
        if len(self.head) < self.limit:
            self.head += text[: self.limit - len(self.head)]
        self.tail = (self.tail + text)[-self.limit :]

    def text(self) -> str:
        """All of it, or its head and tail as clip() keeps them."""
        if self.count <= self.limit:
            return self.head
        half = self.limit // 2
        return joined(self.head[:half], f"{self.count - 2 * half} characters", self.tail[-half:])


def shell_env() -> dict[str, str]:
    """The environment minus the API key (no variable named for a key, and none whose value
    holds it or a password the person gave), plus a git setting that ignores a bare repository
    git was not pointed to (safe.bareRepository, git 2.38 and later)."""
    # made again only when the environment or the secrets have changed: made for every command,
    # it took a tenth of a millisecond (os.environ's own dict, _data, is compared in C)
    environ, secrets = getattr(os.environ, "_data", None), credentials()
    made_of, env = MADE_ENV.get("last", (None, None))
    if environ is None or made_of != (environ, secrets):
        made_of = (dict(environ) if environ is not None else None, secrets)
        env = env_without(secrets)
        MADE_ENV["last"] = (made_of, env)  # one assignment: another thread sees all of it or none
    return dict(env)


MADE_ENV = {}  # the last environment shell_env() made, and what it was made of


def env_without(secrets: list[str]) -> dict[str, str]:
    """The environment without the key and secrets, with git's setting (shell_env())."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SECRET_NAMES and not any(secret in v for secret in secrets)
    }
    count = int(env["GIT_CONFIG_COUNT"]) if env.get("GIT_CONFIG_COUNT", "").isdigit() else 0
    env.update(
        {
            "GIT_CONFIG_COUNT": str(count + 1),
            f"GIT_CONFIG_KEY_{count}": "safe.bareRepository",
            f"GIT_CONFIG_VALUE_{count}": "explicit",
        }
    )
    return env


@functools.cache  # once is enough: the setting lasts as long as the process
def adopt_orphans() -> None:
    """On Linux, make the agent the parent of every orphan its commands leave (a child subreaper),
    so that one started with setsid or nohup, or by a shell that has exited, can still be
    found and ended."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def children(pid: int) -> set[int]:
    """The processes whose parent is pid (Linux's /proc; elsewhere none are known)."""
    found = set()
    try:  # a process that has just exited has no /proc entry left, even while it is listed
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            found |= {
                int(child)
                for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            }
    return found


def descendants(pid: int) -> set[int]:
    """pid's children, their children, and so on."""
    found, todo = set(), [pid]
    while todo:
        for child in children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


def wait_ended(pids: set[int], seconds: float = KILL_GRACE) -> None:
    """Reap pids, children of the agent that are ending, waiting at most seconds in all; one still
    there then is killed."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        with contextlib.suppress(ChildProcessError):  # not the agent's child (any more)
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    kill(pid)
                    os.waitpid(pid, 0)  # killed: it ends at once, and leaves no zombie
                    break
                time.sleep(0.001)


def stop_command(process: subprocess.Popen, before: set[int]) -> None:
    """End the command, every process it started, also those that left its process group (setsid),
    and every orphan it left to the agent since it started (those in before were there already)."""
    kill_rounds(
        lambda: descendants(process.pid) | (children(os.getpid()) - before - {process.pid}), process
    )
    process.wait()


def stop_all() -> None:
    """At exit: end every process a command started that is still running (on Linux, where
    they are known)."""
    kill_rounds(lambda: descendants(os.getpid()))


def kill_rounds(find, command: subprocess.Popen | None = None) -> None:
    """Kill what find() returns (and the command's process group), round after round until nothing
    is left: each round ends what the round before could not see; a fork bomb stops at the tenth."""
    for _ in range(10):
        alive = find()
        if command:
            kill_tree(command)
        for pid in alive:
            kill(pid)
        if not alive:
            return


def kill(pid: int) -> None:
    """SIGKILL one process and its process group, if it still exists; then reap it if it
    was the agent's."""
    for send in (os.kill, getattr(os, "killpg", None)):
        with contextlib.suppress(OSError, TypeError):
            send(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
    with contextlib.suppress(OSError, AttributeError):
        os.waitpid(pid, os.WNOHANG)


if os.name == "nt":
    NEW_PROCESS_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}

    def read_while_running(process: subprocess.Popen, output: Capture, timeout: float) -> None:
        """Read the command's output into output as it comes, by a thread (select() takes no
        pipes on Windows), until the command has ended; subprocess.TimeoutExpired past timeout
        seconds."""
        output.read_on(process.stdout)
        process.wait(timeout)

    def read_rest(process: subprocess.Popen, output: Capture) -> None:
        """Once the command has ended or been killed: the rest of its output, for KILL_GRACE
        seconds at most (a process it started in the background may hold the output open)."""
        output.reader.join(KILL_GRACE)

    def kill_tree(process: subprocess.Popen) -> None:
        """End the command and every process it started (Windows has no killpg)."""
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True)

else:
    NEW_PROCESS_GROUP = {"start_new_session": True}

    def read_while_running(process: subprocess.Popen, output: Capture, timeout: float) -> None:
        """Read the command's output into output as it comes, until the command has ended;
        subprocess.TimeoutExpired past timeout seconds. No thread: the agent waits for the output
        and, on Linux, for the command's end (a pidfd) at once; elsewhere it looks every CHECK
        seconds whether a command that prints nothing has ended."""
        deadline = time.monotonic() + timeout
        ended = end_notice(process)
        waiting = select.poll()  # not select.select(): it takes no descriptor past 1023
        waiting.register(process.stdout, select.POLLIN)
        if ended is not None:
            waiting.register(ended, select.POLLIN)
        try:
            while process.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(process.args, timeout)
                seconds = left if ended is not None else min(left, CHECK)
                ready = [fd for fd, _ in waiting.poll(seconds * 1000)]  # milliseconds
                if process.stdout.fileno() in ready and not output.read_chunk(process.stdout):
                    if ended is None:  # its output closed first: wait for it as subprocess does
                        process.wait(max(0.0, deadline - time.monotonic()))
                        return
                    waiting.unregister(process.stdout)
        finally:
            if ended is not None:
                os.close(ended)

    def end_notice(process: subprocess.Popen) -> int | None:
        """A descriptor that poll() finds readable once process has ended (Linux 5.3 and later:
        os.pidfd_open), or None."""
        try:
            return os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            return None

    def read_rest(process: subprocess.Popen, output: Capture) -> None:
        """Once the command has ended or been killed: the rest of its output, for KILL_GRACE
        seconds at most. A process it started in the background may hold the output open: a
        thread then reads on, so that it never waits on a full pipe."""
        deadline = time.monotonic() + KILL_GRACE
        while not output.ended and time.monotonic() < deadline:
            output.read_some(process.stdout, deadline - time.monotonic())
        if not output.ended:
            output.read_on(process.stdout)

    def kill_tree(process: subprocess.Popen) -> None:
        """End the command and every process it started: its whole process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
