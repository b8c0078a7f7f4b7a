"""What a tool call leans on between the loop and the tool: the error a tool tells the model,
the tools' schemas and parameters, which call is in flight, and what a tool is given by naming it.
"""

import contextlib
import inspect
import weakref
from collections.abc import Callable


class ToolError(Exception):
    """A refusal or failure, told to the model as it is."""


def schemas(tools: list) -> list[dict]:
    """What a request shows the model of the tools a run offers: TOOLS, for the three."""
    return [tool.schema for tool in tools]


class Parameters(list):
    """A tool's parameter names, in order; optional: those a call may leave out (the schema's
    "required" names the rest; all are required where it names none)."""

    optional: tuple = ()


def parameters(tools: list) -> dict[str, Parameters]:
    """{tool name: its Parameters} of what tools show the model (Tools or their schemas)."""
    found = {}
    for tool in tools:
        function = getattr(tool, "schema", tool)["function"]  # a tools.Tool, or its schema
        schema = function.get("parameters", {})
        found[function["name"]] = names = Parameters(schema.get("properties", {}))
        names.optional = tuple(n for n in names if n not in schema.get("required", names))
    return found


def required(tools: list) -> dict[str, list[str]]:
    """{tool name: the parameters a call must give}."""
    return {
        name: [p for p in names if p not in names.optional]
        for name, names in parameters(tools).items()
    }


def in_flight(messages: list[dict] | None, name: str, arguments: str) -> str | None:
    """The id of the call run_call() runs: the first call of the last reply that has no tool
    message yet (run() answers a reply's calls in their order), where it is this name and these
    arguments; None otherwise (run_call() called on its own)."""
    try:
        last = next(i for i in reversed(range(len(messages))) if messages[i]["role"] != "tool")
        answered = {m["tool_call_id"] for m in messages[last + 1 :]}
        calls = [c for c in messages[last]["tool_calls"] or [] if c["id"] not in answered]
        function = calls[0]["function"]
        same = (function["name"], function["arguments"]) == (name, arguments)
    except (IndexError, KeyError, StopIteration, TypeError):
        return None  # no open call (or no conversation of run()'s: a program's own list)
    return calls[0]["id"] if same else None


def taken_by(function: Callable, given: dict) -> dict:
    """What of given a tool's function names among its keyword-only parameters."""
    return {name: given[name] for name in keyword_only(function) if name in given}


def keyword_only(function: Callable) -> tuple[str, ...]:
    """The names of a function's keyword-only parameters, found once a tool (inspect.signature()
    is slow); a callable that cannot be a weak key is asked every time."""
    with contextlib.suppress(KeyError, TypeError):
        return KEYWORD_ONLY[function]
    named = inspect.signature(function).parameters.values()
    found = tuple(p.name for p in named if p.kind is p.KEYWORD_ONLY)
    with contextlib.suppress(TypeError):
        KEYWORD_ONLY[function] = found
    return found


KEYWORD_ONLY = weakref.WeakKeyDictionary()  # a tool's function: its keyword-only parameters
