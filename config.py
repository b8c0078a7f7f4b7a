"""Settings, read once at start: command-line flag > environment > the .env beside
agent.py > default.

The environment and .env are read when this file is imported; the command line when
cli.main() calls parse_options(). A bad setting raises ConfigError there, and
main() turns it into one line and exit status 2. Nothing here imports the openai package.

Settings come from the person alone. A .env in the current folder or above it is never read:
a cloned repository or a shared folder could plant one that sends the key to its own server.
From the project's own .env only the settings below are taken, as written (no ${VAR} expansion),
and nothing from it reaches the environment of the commands the agent runs.
"""

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import NamedTuple, NoReturn
from urllib.parse import unquote, urlsplit

HERE = Path(__file__).resolve().parent


def read_dotenv(path: Path) -> dict:
    """The variables in the .env file at path. python-dotenv is imported only where there is one
    (importing it takes milliseconds of every start), and not at all before it is installed:
    parse_options() says how to install it, in one line."""
    if not path.is_file():  # as python-dotenv reads none but a file
        return {}
    try:
        from dotenv import dotenv_values
    except ModuleNotFoundError:
        return {}
    return dotenv_values(path, interpolate=False)


NAMES = (
    "AGENT_BASE_URL",
    "AGENT_MODEL",
    "AGENT_API_KEY",
    "DEEPSEEK_API_KEY",
    "AGENT_TIMEOUT",
    "AGENT_SHELL_TIMEOUT",
    "AGENT_MAX_OUTPUT",
    "AGENT_CONTEXT_WINDOW",
    "AGENT_SANDBOX",
    "AGENT_SANDBOX_NETWORK",
    "AGENT_TEXT_CALLS",
    "AGENT_PRICE_INPUT",
    "AGENT_PRICE_CACHED",
    "AGENT_PRICE_OUTPUT",
    "AGENT_CURRENCY",
    "AGENT_BUDGET",
)
FILE = {k: v for k, v in read_dotenv(HERE / ".env").items() if k in NAMES and v is not None}


def setting(name: str) -> str:
    """A setting from the environment, else from the .env beside agent.py; "" if neither has it.
    A variable set to "" in the environment counts as set: it keeps the file's value out."""
    return os.environ[name] if name in os.environ else FILE.get(name, "")


class ConfigError(ValueError):
    """A setting that cannot be used; its message names the setting and what it must be."""


BAD = []  # the first bad numeric setting is raised by parse_options(); see number()


def number(name: str, default: float, least: float = 0) -> float:
    """A number above 0 (and at least `least`) from the environment. A bad value keeps the
    default and is noted in BAD, so that importing this file never fails and main() can say what
    is wrong in one line."""
    raw = setting(name).strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = 0.0
    if 0 < value < float("inf") and value >= least:
        return value
    BAD.append(
        f"{name}={raw!r} must be a number of at least {least:g}"
        if least
        else f"{name}={raw!r} must be a positive number"
    )
    return default


def price(name: str, what: str = "a price per million tokens") -> float | None:
    """A price per million tokens, or another amount of money (what), 0 or more, from the
    environment; None when not set. A bad value is noted in BAD, as number() notes one."""
    raw = setting(name).strip()
    if not raw:
        return None
    value = money_amount(raw)
    if value is None:
        BAD.append(f"{name}={raw!r} must be {what}: a number of at least 0")
    return value


def money_amount(text: str) -> float | None:
    """text as an amount of money or a price: a number of at least 0; None if it is none."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value < float("inf") else None


def no_price_for(model: str) -> str:
    """Why a budget cannot be kept for model: one line, with the settings that give a price."""
    return (
        f"a budget needs a price, and none is known for the model {model!r}: give "
        "AGENT_PRICE_INPUT and AGENT_PRICE_OUTPUT (--price-input, --price-output)"
    )


BASE_URL = setting("AGENT_BASE_URL") or "https://api.deepseek.com"
MODEL = setting("AGENT_MODEL") or "deepseek-flash"
# Never OPENAI_API_KEY: it would be sent to whatever server BASE_URL names.
API_KEY = setting("AGENT_API_KEY") or setting("DEEPSEEK_API_KEY")
# The key to blank out of what the agent shows and the model sees. A short one is a placeholder
# for a local server ("none", "ollama"), no secret: blanking it would mangle every text that
# happens to hold the word.
HIDDEN_KEY = API_KEY if len(API_KEY) >= 16 else ""


def raw_password(url: str) -> str:
    """The password as the address writes it, percent-encoded ("" if none)."""
    try:
        return urlsplit(url).password or ""
    except ValueError:  # a port that is not a number, and the like: the address is refused later
        return ""


def url_password(url: str) -> str:
    """The password in a server address (http://user:PASSWORD@host/v1, which the SDK sends as
    basic auth), decoded, or ""."""
    return unquote(raw_password(url))


# Other credentials to hide wherever the key is: a password in the server's address (one of six
# characters or more: a shorter one would mangle text; the address itself is always shown with
# *** for it). parse_options() adds the one --base-url gives.
HIDDEN_PASSWORDS = tuple(p for p in [url_password(BASE_URL), raw_password(BASE_URL)] if len(p) >= 6)
# seconds one request to the model may take, body and stream included
TIMEOUT = number("AGENT_TIMEOUT", 300)
SHELL_TIMEOUT = number("AGENT_SHELL_TIMEOUT", 60)  # seconds
MAX_OUTPUT = int(number("AGENT_MAX_OUTPUT", 10_000, least=1000))  # characters of a tool result
MAX_STEPS = 20  # model requests per task
# tokens the model reads at most; 0 when not set: its family's (realworld/compaction.py)
CONTEXT_WINDOW = (
    int(number("AGENT_CONTEXT_WINDOW", 0, least=256)) if setting("AGENT_CONTEXT_WINDOW") else 0
)
MAX_CALLS = 8  # tool calls run from one reply; with MAX_OUTPUT, this bounds what one step adds
# --sandbox: every command in an OS sandbox (realworld/sandbox.py)
SANDBOX = setting("AGENT_SANDBOX") == "1"
# the sandbox keeps the network (pip install)
SANDBOX_NETWORK = setting("AGENT_SANDBOX_NETWORK") == "1"
# A call the model wrote as text, not as a tool call (realworld/dialects.py): "ask", every one that
# could change anything waits for the person's yes, --yes or not; "run", as a tool call would;
# "off", none is read, the text is the answer. A bad value is refused by parse_options(); until
# then it asks.
TEXT_CALLS_CHOICES = ("ask", "run", "off")
TEXT_CALLS = setting("AGENT_TEXT_CALLS").strip().lower() or "ask"
# Money: what each reply cost, at these prices per million tokens (prompt tokens not cached,
# cached, completion), for any model; None where not set: the model's own below, if it has one.
PRICE_INPUT = price("AGENT_PRICE_INPUT")
PRICE_CACHED = price("AGENT_PRICE_CACHED")  # not set: as PRICE_INPUT (no discount known)
PRICE_OUTPUT = price("AGENT_PRICE_OUTPUT")
CURRENCY = setting("AGENT_CURRENCY").strip()  # a label for the prices above: USD, CNY, ...
# the most a run may spend, in the prices' currency; None: no limit
BUDGET = price("AGENT_BUDGET", "an amount of money")
WORKDIR = HERE / "playground"
# where transcripts and the pause key are kept
RUNS = Path(setting("AGENT_RUNS")).expanduser() if setting("AGENT_RUNS") else HERE / "runs"


class Prices(NamedTuple):
    """What a model's tokens cost, per million: prompt tokens not cached (input), cached prompt
    tokens (cached), completion tokens (output); currency: their label ("" if none was given)."""

    input: float
    cached: float
    output: float
    currency: str


# DeepSeek's prices (the default server), in USD per million tokens: (input on a cache miss, input
# on a cache hit, output). From DeepSeek's "Models & Pricing" page,
# https://api-docs.deepseek.com/quick_start/pricing, read on 2026-12-02 (the page of
# DeepSeek-V4.1-Flash-1017 and DeepSeek-V4-Pro-0813). DeepSeek bills half of these off-peak (every
# hour but 01:00-04:00 and 06:00-10:00 UTC on weekdays); these are the peak prices, so what the
# agent says is at most what DeepSeek bills, and a budget stops early, never late. The page lists
# deepseek-flash and deepseek-v4-pro, and says that the legacy names deepseek-v4-flash and
# deepseek-v4-flash-vision-exp are served by V4.1 Flash and billed at its price.
DEEPSEEK_PRICES = {
    "deepseek-flash": (0.3, 0.006, 1.2),
    "deepseek-v4-flash": (0.3, 0.006, 1.2),
    "deepseek-v4-flash-vision-exp": (0.3, 0.006, 1.2),
    "deepseek-v4-pro": (1.32, 0.044, 3.96),
}


def prices(model: str) -> Prices | None:
    """What model's tokens cost: the AGENT_PRICE_* settings if given (any model), else the
    model's built-in price (DEEPSEEK_PRICES); None where no price is known: tokens alone are
    shown, never a guess."""
    if PRICE_INPUT is not None and PRICE_OUTPUT is not None:
        cached = PRICE_INPUT if PRICE_CACHED is None else PRICE_CACHED
        return Prices(PRICE_INPUT, cached, PRICE_OUTPUT, CURRENCY)
    if model in DEEPSEEK_PRICES:
        return Prices(*DEEPSEEK_PRICES[model], "USD")
    return None


HELP_EPILOG = """\
settings (flag > environment > the .env beside agent.py, never one in the current folder > default):
  AGENT_BASE_URL       server address              default https://api.deepseek.com
  AGENT_MODEL          model name                  default deepseek-flash
  AGENT_API_KEY        API key (or DEEPSEEK_API_KEY; never OPENAI_API_KEY).
                       Not needed for a server on this machine (localhost).
  AGENT_TIMEOUT        seconds one model request may take, all of it  default 300
                       (the SDK tries twice more after a timeout)
  AGENT_SHELL_TIMEOUT  seconds before a shell command is killed      default 60
  AGENT_MAX_OUTPUT     characters of a tool result kept for the model  default 10000
  AGENT_CONTEXT_WINDOW tokens the model can read; past 3/4 of it, old turns are compacted
                       default: the model family's (deepseek 128000, qwen3 40960, ...)
  AGENT_SANDBOX        1: as --sandbox                                default off
  AGENT_SANDBOX_NETWORK 1: sandboxed commands keep the network         default off
  AGENT_TEXT_CALLS     a call the model wrote as text (--text-calls): ask, run or off
                       default ask: it waits for your yes, with --yes too (read_file runs)
  AGENT_RUNS           the folder for transcripts and the pause key    default runs/ beside agent.py
  AGENT_PRICE_INPUT    price of a million prompt tokens not cached, for any model (--price-input)
  AGENT_PRICE_CACHED   price of a million cached prompt tokens (--price-cached); default: as input
  AGENT_PRICE_OUTPUT   price of a million completion tokens (--price-output)
                       default: DeepSeek's peak prices for its models (USD); none for others:
                       tokens alone are shown
  AGENT_CURRENCY       the label of those prices (--currency): USD, CNY, ...
  AGENT_BUDGET         the most a run may spend, in the prices' currency (--budget)

with no task: on a terminal, type one task a line (exit or Ctrl-D ends);
  otherwise the task is read from standard input.

exit status: 0 answered, 1 API or network failure, 2 bad usage or configuration,
  3 stopped without an answer (step limit, the reply was cut off, filtered or
  empty, the budget spent, or a replay ran out of recorded replies), 4 paused:
  a command waits for a yes (--resume RUN --approve or --reject), 130
  interrupted (Ctrl-C; SIGTERM 143, SIGHUP 129), 141 stdout closed early

examples:
  python agent.py "write hello.py that prints hello, then run it"
  python agent.py --replay examples/lesson-01.jsonl     (no key, no network)
  python agent.py --resume runs/20261130T101500123456Z.jsonl "now add a test"
  python agent.py --resume runs/20261130T101500123456Z.jsonl --approve   (a paused run)
  echo "list the files" | python agent.py --yes
  AGENT_BASE_URL=http://localhost:11434/v1 AGENT_MODEL=qwen3 python agent.py "list the files"
"""


def examples_of(prog: str) -> str:
    """--help's closing text, its examples given for the program started: another program's own
    replay is the lesson its first lines name."""
    text = HELP_EPILOG
    if prog != "agent.py":
        lesson = "--replay examples/lesson-01.jsonl     (no key, no network)"
        text = text.replace(lesson, "--replay TRANSCRIPT   (its lesson: see its first lines)")
    return text.replace("python agent.py", f"python {prog}")


def one_line_error(message: str) -> NoReturn:
    """A malformed option in one line on stderr, exit status 2, as argparse exits."""
    print(f"agent: {message} (python agent.py --help lists the options)", file=sys.stderr)
    raise SystemExit(2)


def parse_options(
    argv: list[str] | None, prog: str = "agent.py", tools: tuple = ()
) -> argparse.Namespace:
    """The command line, on top of the environment. Raises ConfigError for a bad setting. prog:
    the program's name, as --help says it; tools: the names of the tools it offers."""
    global PRICE_INPUT, PRICE_CACHED, PRICE_OUTPUT, CURRENCY  # set once, below, as SANDBOX
    global TEXT_CALLS  # read where a reply is read (replies.py) and a call asks (consent.py)
    if BAD:
        raise ConfigError(BAD[0])
    offered = f"its tools ({', '.join(tools)})" if tools else "three tools"
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"A minimal agent: a model, {offered} and a loop.",
        epilog=examples_of(prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("task", nargs="*", help="what to do, in words")
    add("-y", "--yes", action="store_true", help="run shell commands without asking")
    add(
        "--sandbox",
        action="store_true",
        help="run shell commands in an OS sandbox: no network, writes only in the "
        "workspace (Linux: bubblewrap; AGENT_SANDBOX=1)",
    )
    add(
        "--max-steps",
        type=positive_int,
        default=MAX_STEPS,
        metavar="N",
        help=f"model requests per task ({MAX_STEPS})",
    )
    add("--model", default=MODEL, metavar="NAME", help="model name (AGENT_MODEL)")
    add("--base-url", default=BASE_URL, metavar="URL", help="server address (AGENT_BASE_URL)")
    add(
        "--workdir",
        type=Path,
        default=WORKDIR,
        metavar="DIR",
        help="the tools' folder (playground/)",
    )
    add(
        "--transcript",
        type=Path,
        metavar="PATH",
        help="where to write the transcript (runs/<UTC time>.jsonl)",
    )
    add(
        "--approve",
        nargs="*",
        action="extend",
        metavar="CODE",
        help="with --resume: run the calls a paused run waits on (those codes, or all)",
    )
    add(
        "--reject",
        metavar="REASON",
        help="with --resume: decline the waiting calls not approved, with a reason for the model",
    )
    add(
        "--budget",
        type=amount,
        default=BUDGET,
        metavar="AMOUNT",
        help="stop before a request once this much is spent, in the prices' currency "
        "(AGENT_BUDGET)",
    )
    for flag, tokens, default in (
        ("--price-input", "prompt tokens not cached (AGENT_PRICE_INPUT)", PRICE_INPUT),
        ("--price-cached", "cached prompt tokens (AGENT_PRICE_CACHED)", PRICE_CACHED),
        ("--price-output", "completion tokens (AGENT_PRICE_OUTPUT)", PRICE_OUTPUT),
    ):
        add(flag, type=amount, default=default, metavar="PRICE", help=f"price of 1M {tokens}")
    add("--currency", default=CURRENCY, metavar="LABEL", help="the prices' label (AGENT_CURRENCY)")
    add(
        "--text-calls",
        default=TEXT_CALLS,
        metavar="ASK|RUN|OFF",
        help="a call the model wrote as text: ask for a yes (with --yes too), run it as a tool "
        "call, or read none (AGENT_TEXT_CALLS; ask)",
    )
    add("--stream", action="store_true", help="print the answer as it is written")
    add("--trace", action="store_true", help="print each request and raw response on stderr")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--replay",
        type=Path,
        metavar="TRANSCRIPT",
        help="answer with a transcript's recorded replies",
    )
    group.add_argument(
        "--resume", type=Path, metavar="TRANSCRIPT", help="continue a transcript's conversation"
    )
    group.add_argument(
        "--show", type=Path, metavar="TRANSCRIPT", help="print a transcript as a conversation"
    )
    group.add_argument(
        "--html",
        nargs=2,
        type=Path,
        metavar=("TRANSCRIPT", "PAGE"),
        help="write a transcript as one HTML page to open in a browser",
    )
    parser.error = one_line_error  # the docs promise one line, not argparse's usage
    options = parser.parse_args(argv)
    missing = [name for name in ("openai", "dotenv") if importlib.util.find_spec(name) is None]
    if missing and not (options.show or options.html):  # --show and --html need neither
        raise ConfigError(
            f"{' and '.join(missing)} not installed here; in this folder run: "
            "python3 -m venv .venv && . .venv/bin/activate && pip install .  "
            "(or activate the .venv made before)"
        )
    if not options.base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"the server address {options.base_url!r} must start with http:// or https://"
        )
    global HIDDEN_PASSWORDS  # set once, here, before anything runs, as SANDBOX below
    for password in (url_password(options.base_url), raw_password(options.base_url)):
        if len(password) >= 6 and password not in HIDDEN_PASSWORDS:
            HIDDEN_PASSWORDS = (*HIDDEN_PASSWORDS, password)
    global SANDBOX  # set once, here, before anything runs; read where commands run (commands.py)
    SANDBOX = SANDBOX or options.sandbox
    TEXT_CALLS = options.text_calls.strip().lower()
    if TEXT_CALLS not in TEXT_CALLS_CHOICES:
        raise ConfigError(
            f"AGENT_TEXT_CALLS (--text-calls) is {options.text_calls!r}: give ask, run or off"
        )
    PRICE_INPUT, PRICE_CACHED = options.price_input, options.price_cached
    PRICE_OUTPUT, CURRENCY = options.price_output, options.currency.strip()
    if problem := prices_problem(options.model, options.budget):
        raise ConfigError(problem)
    return options


def prices_problem(model: str, budget: float | None) -> str | None:
    """What makes the prices given unusable, or a budget unkeepable for model, in one line; None
    if nothing does."""
    if (PRICE_INPUT is None) != (PRICE_OUTPUT is None):
        return (
            "AGENT_PRICE_INPUT and AGENT_PRICE_OUTPUT (--price-input, --price-output) go together: "
            "give both, or neither"
        )
    if PRICE_INPUT is None and (PRICE_CACHED is not None or CURRENCY):
        return (
            "AGENT_PRICE_CACHED and AGENT_CURRENCY go with AGENT_PRICE_INPUT and "
            "AGENT_PRICE_OUTPUT: give those too (the built-in prices are DeepSeek's, in USD)"
        )
    if budget is not None and prices(model) is None:
        return no_price_for(model)
    return None


def amount(text: str) -> float:
    """argparse type: a price or a budget, a number of at least 0."""
    value = money_amount(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of at least 0")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)
