"""A command run in the workspace: its output read as it comes and bounded, its processes ended
when it ends or times out, the sandbox around it where --sandbox is set.
"""

import os
import subprocess

import config
from realworld import own, processes, sandbox
from realworld.calls import ToolError
from realworld.consent import is_command


def run(command: str, workdir, timeout: float | None = None) -> str:
    """Run a shell command in the workspace; return its output and exit status. The output is read
    as it comes and only its head and tail are kept, so a command that prints without end cannot
    fill memory."""
    if not is_command(command):
        raise ToolError(
            "command must be one non-empty string, the command line as typed in a shell"
        )
    if problem := own.overlap(workdir):
        raise ToolError(problem)
    processes.adopt_orphans()
    before, process, configuration = processes.children(os.getpid()), None, None
    # Less than MAX_OUTPUT, leaving room for the timeout message and the exit status: clip()
    # then keeps it whole.
    output = processes.Capture(config.MAX_OUTPUT - 200)
    timeout = timeout or config.SHELL_TIMEOUT
    options = {
        "cwd": workdir,
        "env": processes.shell_env(),
        "stdin": subprocess.DEVNULL,  # a command that reads input gets end-of-file, not a hang
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        **processes.NEW_PROCESS_GROUP,
    }
    try:
        if config.SANDBOX:  # what sandbox.finish() compares with
            process, configuration = sandbox.start(command, workdir, options)
        else:
            process = subprocess.Popen(command, shell=True, **options)
        # its output read as it comes; TimeoutExpired if it has not ended within timeout
        processes.read_while_running(process, output, timeout)
    except subprocess.TimeoutExpired:
        processes.stop_command(process, before)
        processes.read_rest(process, output)
        cleaned = sandbox.finish(workdir, configuration) if configuration is not None else ""
        raise ToolError(
            f"timed out after {timeout:g} seconds and was killed; output so far:\n{output.text()}"
            + cleaned
        ) from None
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: the command must not outlive the agent
        if process:
            processes.stop_command(process, before)
        if configuration is not None:
            sandbox.finish(workdir, configuration)
        raise
    # a process it started in the background may hold the output open
    processes.read_rest(process, output)
    text = output.text()
    if process.returncode:
        text += f"\n[exit status {process.returncode}]{sandbox.hint(text)}"
    if configuration is not None:
        text += sandbox.finish(workdir, configuration)
    return text or "(no output)"
