"""A pause goes on only with its own settings, whichever way it is resumed (issue #42, family 1).
Found: a pause made with --base-url X --model M, then --resume RUN without --approve: at a
terminal it asked, ran the command and sent the conversation to the default server; with no
terminal it paused again and recorded the default server as the pause's settings. --resume RUN
--yes --workdir /elsewhere ran the waiting command in the other folder; --resume RUN --base-url Y
--model N ran it in the default workspace and sent the conversation to Y.

The family is every setting that decides where a waiting command runs or where the conversation
goes, as pauses.settings_of() records them: the workspace, the sandbox, the sandbox's network, the
server's address and the model. A resume whose last turn paused, with any one of them other than
recorded, is refused in one line naming what to give, whatever else it says (nothing, --yes,
--approve, --reject, at a terminal or not): no request goes to any server, nothing is appended to
the transcript and nothing runs."""

import fcntl

import pytest
from conftest import KEY, clean_env, events_of, posix_only
from scripted_server import ScriptedServer, call, reply

from realworld import sandbox


@pytest.fixture
def other_server():
    s = ScriptedServer()
    yield s
    s.close()


def sandboxed() -> None:
    if sandbox.problem():
        pytest.skip("no working sandbox here")


# (the setting, how the pause was made, how the resume differs): flags and environment
SETTINGS = {
    "workspace": ((), {}, ("--workdir", "{elsewhere}"), {}),
    "model": (("--model", "m-1"), {}, ("--model", "m-2"), {}),
    "base_url": ((), {}, ("--base-url", "{other}"), {}),
    "sandbox": ((), {}, ("--sandbox",), {}),
    "no sandbox": (("--sandbox",), {}, (), {}),
    "sandbox_network": (("--sandbox",), {"AGENT_SANDBOX_NETWORK": "1"}, ("--sandbox",), {}),
}
# the way the resume would go on
WAYS = {
    "no terminal": ((), {}),
    "at a terminal": ((), {"terminal": "y\n"}),
    "--yes": (("--yes",), {}),
    "--approve CODE": (("--approve", "{code}"), {}),
    "--reject": (("--reject", "no"), {}),
}


def filled(words, **values) -> list[str]:
    return [w.format(**values) for w in words]


@posix_only
@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_pause_resumed_with_another_setting_is_refused_and_nothing_is_sent_or_written(
    agent, server, other_server, tmp_path, setting, way
):
    made_with, made_env, resumed_with, resumed_env = SETTINGS[setting]
    if "--sandbox" in (*made_with, *resumed_with):
        sandboxed()
    own = tmp_path / "own workspace"
    own.mkdir()
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    env = clean_env(AGENT_API_KEY=KEY, **made_env)
    made = agent("--workdir", str(own), *made_with, "go", env=env)
    assert made.returncode == 4, made.stderr
    pause = events_of(made.transcript)[-1]
    assert pause["status"] == "paused" and isinstance(pause.get("seal"), str)
    before, sent = made.transcript.read_bytes(), len(server.requests)
    server.add(reply("done"))
    other_server.add(reply("done"))

    elsewhere = tmp_path / "elsewhere"
    values = {"elsewhere": str(elsewhere), "other": other_server.url}
    values["code"] = pause["pending"][0]["code"]
    flags, how = WAYS[way]
    words = ["--workdir", str(own), *made_with, *filled(resumed_with, **values)]
    if setting in ("no sandbox", "sandbox_network"):
        words = [w for w in words if w != "--sandbox"] if setting == "no sandbox" else words
    env = clean_env(AGENT_API_KEY=KEY, **resumed_env)
    went = agent(*words, "--resume", str(made.transcript), *filled(flags, **values), env=env, **how)

    assert went.returncode == 2, went.stderr
    (line,) = went.stderr.strip().splitlines()
    named = setting if setting not in ("sandbox", "no sandbox") else "sandbox"
    assert "other settings" in line and named in line and "nothing was run" in line, line
    give = {
        "workspace": f"--workdir={own}",
        "model": "--model=m-1",
        "base_url": f"--base-url={server.url}",
        "sandbox": "no --sandbox and AGENT_SANDBOX unset",
        "no sandbox": "--sandbox",
        "sandbox_network": "AGENT_SANDBOX_NETWORK=1",
    }[setting]
    assert give in line.split(": give ", 1)[1], line
    assert len(server.requests) == sent and other_server.requests == []
    assert made.transcript.read_bytes() == before
    assert not (own / "ran").exists() and not elsewhere.exists()
    assert not (agent.workdir / "ran").exists()


@posix_only
@pytest.mark.parametrize("terminal", [None, "y\n"])
def test_with_its_own_settings_a_pause_still_goes_on_without_approve(agent, server, terminal):
    # the rule refuses other settings only: the way on as before, asked or paused again
    own = agent.tmp_path / "own"
    own.mkdir()
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    made = agent("--workdir", str(own), "--model", "m-1", "go")
    assert made.returncode == 4
    server.add(reply("done"))
    went = agent(
        "--workdir", str(own), "--model", "m-1", "--resume", str(made.transcript), terminal=terminal
    )
    if terminal:
        assert went.returncode == 0 and (own / "ran").exists(), went.stderr
        assert server.requests[-1]["body"]["model"] == "m-1"
    else:  # paused again, with the settings it had: nothing sent
        assert went.returncode == 4 and not (own / "ran").exists()
        assert events_of(made.transcript)[-1]["settings"]["model"] == "m-1"


@posix_only
@pytest.mark.parametrize("terminal", [None, "y\n"])
def test_a_pause_not_sealed_here_is_refused_as_the_transcripts_claim(
    agent, server, other_server, tmp_path, terminal
):
    # docs/safety.md: "for a pause not sealed here the line says that the transcript claims
    # them": a copy under another name is not sealed here (the seal covers the path)
    own = tmp_path / "own"
    own.mkdir()
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    made = agent("--workdir", str(own), "go")
    assert made.returncode == 4
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(made.transcript.read_bytes())
    other_server.add(reply("done"))
    went = agent(
        "--base-url",
        other_server.url,
        "--workdir",
        str(own),
        "--resume",
        str(copy),
        terminal=terminal,
    )
    assert went.returncode == 2
    (line,) = went.stderr.strip().splitlines()
    assert "the transcript says this pause ran with other settings (base_url)" in line
    assert other_server.requests == [] and copy.read_bytes() == made.transcript.read_bytes()
    assert not (own / "ran").exists()


@posix_only
def test_a_resume_refused_before_it_goes_on_leaves_the_pause_to_a_bare_approve(
    agent, server, tmp_path
):
    # flock(2): a second agent cannot lock a transcript in use; a bare --approve refused then ran
    # nothing, so the pause is not gone on from: it was spent, and the next one was told the pause
    # "was not recorded by this agent here, or was changed since"
    own = tmp_path / "own"
    own.mkdir()
    server.add(reply(tool_calls=[call("run_shell", {"command": "touch ran"}, "c1")]))
    made = agent("--workdir", str(own), "go")
    assert made.returncode == 4, made.stderr
    resume = ["--workdir", str(own), "--resume", str(made.transcript), "--approve"]
    with open(made.transcript) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        refused = agent(*resume)
    assert refused.returncode == 2 and "is in use by another agent" in refused.stderr
    assert not (own / "ran").exists()
    server.add(reply("done"))
    went = agent(*resume)
    assert went.returncode == 0 and (own / "ran").exists(), went.stderr
