import atexit
import json
import os
import select
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Nothing a test runs keeps a transcript or a pause key in the checkout's runs/: a folder of this
# worker's own, set before config.py reads it (tests/test_layout.py checks runs/ and playground/).
os.environ["AGENT_RUNS"] = tempfile.mkdtemp(prefix="agent-test-runs-")

import forkserver
import offline
import pytest
from offline import reaches_no_further_than_loopback  # noqa: F401 (autouse: every test offline)
from scripted_server import ScriptedServer, call, reply

import agent as agent_module
import config
from realworld import replies

atexit.register(shutil.rmtree, os.environ["AGENT_RUNS"], ignore_errors=True)
offline.go_offline(os.path.join(os.environ["AGENT_RUNS"], "offline.log"))  # before any child
ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "agent.py"
KEY = "sk-test-7f3a9c-secret"
LESSON = ROOT / "examples" / "lesson-01.jsonl"


def system_certificates_as_a_folder() -> None:
    """The system's certificates from OpenSSL's folder of them (SSL_CERT_DIR), which it reads one
    at a time when a server's certificate needs one, rather than from their bundle file
    (SSL_CERT_FILE, or OpenSSL's cert.pem), which every new client parses whole: 20 ms of CPU, and
    the tests make about 700 clients, in this process and in each agent.py they start. A bundle of
    other certificates than the system's is left as it is."""
    paths = ssl.get_default_verify_paths()
    bundle = os.environ.get("SSL_CERT_FILE", paths.openssl_cafile)
    folder = os.environ.get("SSL_CERT_DIR", paths.openssl_capath)
    if os.path.realpath(bundle) == os.path.realpath(paths.openssl_cafile) and os.path.isdir(folder):
        os.environ.pop("SSL_CERT_FILE", None)
        os.environ["SSL_CERT_DIR"] = folder


system_certificates_as_a_folder()


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    transcript: Path

    def events(self) -> list[dict]:
        return events_of(self.transcript)


def events_of(path: Path) -> list[dict]:
    """The events of a transcript file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


posix_only = pytest.mark.skipif(
    os.name == "nt", reason="needs POSIX: a shell, a pty, signals or a FIFO"
)
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="needs Linux: a child subreaper, /proc"
)


def checkout_files() -> dict:
    """The files in the checkout's runs/ and playground/, with their times of change."""
    found = {}
    for folder in (ROOT / "runs", ROOT / "playground"):
        for path in folder.rglob("*") if folder.is_dir() else []:
            found[path] = path.stat().st_mtime_ns if path.is_file() else None
    return found


@pytest.fixture(scope="session", autouse=True)
def the_checkout_stays_as_it_was():
    """No test writes into the checkout: runs/ and playground/ are the learner's (issue 35)."""
    before = checkout_files()
    yield
    changed = sorted(str(p) for p, t in checkout_files().items() if before.get(p, -1) != t)
    assert not changed, f"tests wrote into the checkout: {changed[:5]}"


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


def as_at_a_terminal() -> None:
    """For a process a test starts that needs Ctrl-C: the signals as a shell at a terminal hands
    them over. A background job (python -m pytest &) starts with SIGINT and SIGQUIT ignored, and
    an ignored signal stays ignored across exec."""
    for number in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment a test runs the agent in: no real keys or settings leak in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_", "OPENAI_")) and k != "DEEPSEEK_API_KEY"
    }
    env["AGENT_RUNS"] = os.environ["AGENT_RUNS"]  # this worker's own, never the checkout's
    # Empty values count as set, so a developer's .env beside agent.py cannot fill them in.
    env.update(
        AGENT_API_KEY="",
        DEEPSEEK_API_KEY="",
        AGENT_MODEL="test-model",
        AGENT_BASE_URL="",
        AGENT_SHELL_TIMEOUT="",
        AGENT_MAX_OUTPUT="",
        AGENT_PRICE_INPUT="",
        AGENT_PRICE_CACHED="",
        AGENT_PRICE_OUTPUT="",
        AGENT_CURRENCY="",
        AGENT_BUDGET="",
        PYTHONUTF8="1",
    )
    env.update(extra)
    return env


forkserver.start_with(clean_env())  # the tests' own settings, whichever test starts a program first


class Agent:
    """Runs agent.py as a real process against the scripted server, in a temporary folder."""

    def __init__(self, server: ScriptedServer, tmp_path: Path):
        self.server, self.tmp_path, self.workdir = server, tmp_path, tmp_path / "work"
        self.runs = 0

    def start(
        self,
        *args: str,
        env: dict | None = None,
        key: str = KEY,
        stdin=subprocess.PIPE,
        fresh: bool = False,
        program: Path = AGENT,
    ):
        """Start the agent (or program: subagent.py, handoff.py); return the process and its
        transcript path. fresh: started by a new interpreter, not forked from one that has imported
        the SDK (forkserver.py)."""
        self.runs += 1
        transcript = self.tmp_path / f"transcript-{self.runs}.jsonl"
        command = [
            sys.executable,
            str(program),
            "--base-url",
            self.server.url,
            "--workdir",
            str(self.workdir),
        ]
        command += ["--transcript", str(transcript), *args]
        env = env or clean_env(AGENT_API_KEY=key)
        process = subprocess.Popen(
            command if fresh else forkserver.command(command, env),
            preexec_fn=as_at_a_terminal if fresh and os.name == "posix" else None,
            cwd=self.tmp_path,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        return process, transcript

    def __call__(
        self,
        *args: str,
        terminal: str | None = None,
        open_stdin: bool = False,
        stdin_text: str = "",
        **start,
    ) -> Result:
        """Run the agent to the end. stdin_text: piped to it. terminal: what a person types
        on a pseudo-terminal as its stdin. open_stdin: a pipe that stays open, as when nobody
        types anything."""
        held = None
        if terminal is not None:
            import pty  # POSIX only, like the tests that use it

            held, start["stdin"] = pty.openpty()
            os.write(held, terminal.encode())  # the terminal keeps it until the agent reads a line
        elif open_stdin:
            start["stdin"], held = os.pipe()
        process, transcript = self.start(*args, **start)
        if held is not None:
            os.close(start["stdin"])
        try:
            stdout, stderr = process.communicate(stdin_text if held is None else None, timeout=120)
        finally:
            if held is not None:
                os.close(held)
        return Result(process.returncode, stdout, stderr, transcript)


@pytest.fixture
def agent(tmp_path, server):
    return Agent(server, tmp_path)


@dataclass
class Ran:
    """What one call of agent.run() returned and printed; used: the tokens of each reply
    (the client's)."""

    status: str
    text: str
    used: list[dict]
    stdout: str
    stderr: str
    transcript: Path

    def events(self) -> list[dict]:
        return events_of(self.transcript)


class Loop:
    """Calls agent.run() in this process, with a client pointed at the scripted server,
    in a temporary folder.

    The client is the one the command line makes (replies.Client over replies.openai_client), time
    limit included; stream and trace are its options."""

    def __init__(self, server: ScriptedServer, tmp_path: Path, capsys):
        self.server, self.tmp_path, self.capsys = server, tmp_path, capsys
        self.workdir = tmp_path / "work"
        self.workdir.mkdir(exist_ok=True)
        self.runs = 0

    def __call__(
        self, task: str = "go", messages: list[dict] | None = None, timeout: float = 60, **options
    ) -> Ran:
        self.runs += 1
        path = self.tmp_path / f"loop-{self.runs}.jsonl"
        inner = replies.openai_client(self.server.url, KEY, timeout)
        client = replies.Client(inner, options.pop("stream", False), options.pop("trace", False))
        options = {"client": client, "model": "test-model", "workdir": self.workdir, **options}
        self.capsys.readouterr()
        with open(path, "x", encoding="utf-8") as transcript:
            outcome = agent_module.run(task, messages, transcript=transcript, **options)
        printed = self.capsys.readouterr()
        return Ran(*outcome, client.tokens, printed.out, printed.err, path)


@pytest.fixture
def loop(tmp_path, server, capsys):
    return Loop(server, tmp_path, capsys)


@pytest.fixture
def text_calls(monkeypatch):
    """Set AGENT_TEXT_CALLS (ask, run, off) for the runs of this process, as parse_options() sets
    it from the environment or --text-calls; the test's end sets it back."""
    return lambda value: monkeypatch.setattr(config, "TEXT_CALLS", value)


def open_fifo(path: Path) -> int:
    """Make a FIFO and open its reading end. A command that holds the writing end, and every
    process it starts, keeps it open: end-of-file means they have all exited."""
    os.mkfifo(path)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def read_fifo(fd: int, until_eof: bool) -> bytes:
    """One chunk from the FIFO, or everything until no process holds it. Fails after 30 s of
    silence."""
    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        assert ready, "a process still holds the FIFO open"
        chunk = os.read(fd, 4096)
        data += chunk
        if not chunk or not until_eof:
            return data


def run_offline(
    tmp_path, *args: str, stdin: str = "", terminal: str | None = None, program: Path = AGENT
) -> subprocess.CompletedProcess:
    """agent.py (or program) with no key and no server: only a replay can work. terminal: what a
    person types on a pseudo-terminal as its stdin."""
    command = [sys.executable, str(program), "--workdir", str(tmp_path / "work"), *args]
    env = clean_env(AGENT_BASE_URL="https://api.deepseek.com")
    held = typed = None
    if terminal is not None:
        import pty  # POSIX only, like the tests that use it

        typed, held = pty.openpty()
        os.write(typed, terminal.encode())
    try:
        return subprocess.run(
            forkserver.command(command, env),
            cwd=tmp_path,
            env=env,
            input=None if held else stdin,
            stdin=held,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )
    finally:
        for fd in (held, typed):
            if fd is not None:
                os.close(fd)


def tool_messages(messages):
    """The tool messages among messages."""
    return [m for m in messages if m["role"] == "tool"]


def shell_then_answer(server, command: str) -> None:
    """Script one run_shell call of command, then the answer "done"."""
    server.add(reply(tool_calls=[call("run_shell", {"command": command}, id="sh1")]), reply("done"))


def tool_result(server) -> str:
    """What the model got back for the last call before the second request."""
    return server.messages(1)[-1]["content"]


@pytest.fixture
def workspace(tmp_path):
    """An empty folder for the tools to work in."""
    root = tmp_path / "work"
    root.mkdir()
    return root


def pdb_replay(
    tmp_path: Path,
    lesson: Path,
    commands: str,
    *flags: str,
    program: Path = AGENT,
    terminal: bool = False,
) -> subprocess.CompletedProcess:
    """agent.py (or program) under pdb, replaying a lesson, with commands typed at the (Pdb)
    prompt; terminal: typed on a pseudo-terminal, as a person does, where a command asks for a yes
    (piped, it would pause), and Ctrl-D after them."""
    if "--workdir" not in flags:  # the checkout's playground/ stays the learner's
        flags = (*flags, "--workdir", str(tmp_path / "work"))
    command = [sys.executable, "-m", "pdb", str(program), "--replay", str(lesson), *flags]
    typed = held = None
    if terminal:
        import pty  # POSIX only, like the tests that use it

        typed, held = pty.openpty()
        os.write(typed, commands.encode() + b"\x04")
    try:
        return subprocess.run(
            forkserver.command(command, clean_env()),
            cwd=tmp_path,
            env=clean_env(),
            input=None if terminal else commands,
            stdin=held,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        for fd in (held, typed):
            if fd is not None:
                os.close(fd)


def msg_line() -> int:
    """The line of agent.py that holds msg = resp.choices[0].message."""
    lines = AGENT.read_text(encoding="utf-8").splitlines()
    return next(
        i for i, text in enumerate(lines, 1) if text.strip() == "msg = resp.choices[0].message"
    )
