"""Every way a run ends: the status run() returns in its Outcome and a transcript's turn/end
records, the exit status the command line gives it, and what it means. Everything that names an
ending reads it here; tests/test_layout.py holds every status the code makes against this table.

    answered           0    the model answered
    api_error          1    the server refused or failed the request (its words are the text)
    context_full       1    the request was longer than the model's context window
    paused             4    a command waits for a yes nobody could give; --resume goes on
    interrupted      130    Ctrl-C, a signal, or q in pdb
    everything else    3    no answer: the text says why
"""

ENDINGS = {
    "answered": (0, "the model answered"),
    "api_error": (1, "the server refused or failed the request"),
    "context_full": (1, "the request was longer than the model's context window"),
    "paused": (4, "a command waits for a yes nobody could give now"),
    "interrupted": (130, "Ctrl-C, a signal, or q in pdb"),
    "max_steps": (3, "MAX_STEPS requests without an answer"),
    "empty_answer": (3, "a reply with no text and no calls"),
    "length": (3, "the reply was cut off at the output token limit"),
    "content_filter": (3, "the provider's content filter stopped the reply"),
    "insufficient_system_resource": (3, "the provider is out of capacity"),
    "incomplete_stream": (3, "the stream ended before the reply was complete"),
    "budget": (3, "the next request would pass the budget; it was not sent"),
    "error": (3, "an exception stopped the run"),
    "replay_ended": (3, "a replay asked for a reply its transcript does not have"),
    "recording_stopped": (3, "a replay reached where its recording was stopped"),
    "no_summary": (3, "a summary's request wrote no summary (a summary's own turn/end)"),
}


def exit_status(status: str | None) -> int:
    """The command line's exit status for a run that ended so (None: Ctrl-C ended it)."""
    return ENDINGS.get(status or "interrupted", (3, ""))[0]
