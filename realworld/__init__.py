"""What the lesson's loop needs to work in the real world, kept out of agent.py.

agent.py holds the loop, tools.py the tools, config.py the settings. This folder holds the rest,
each module one job, each importing only those above it in this list (no circle):
- endings.py: every way a run ends, with its exit status;
- guards.py: what untrusted text passes on its way to the person (escapes shown) and the model
  (the key hidden, the length bounded);
- calls.py: what a tool call leans on: the error a tool tells the model, the tools' schemas,
  which call is in flight;
- dialects.py: tool calls and thinking that models write as text, read back;
- own.py: what the agent keeps for itself (its folder, runs/, its Python), out of every tool's
  reach: a workspace that overlaps it is refused;
- protected.py: what no tool call may change in the workspace (.git, .env), and what a command
  made of it moved aside, never deleted;
- processes.py: a command's output read as it comes, and no process outliving its command;
- sandbox.py: --sandbox, every command confined by the operating system;
- workspace.py: the workspace the file tools stay in: paths, reads with bounds, whole writes;
- consent.py: what needs the person's yes, and the question that shows what would run;
- commands.py: run_shell's command, run with its output bounded and its processes ended;
- replies.py: the client run() talks to: a whole, honest reply from whatever a server sends;
- transcripts.py: every run written down as it happens, one event a line, and read back;
- compaction.py: a conversation that outlasts the model's context window (lesson 10);
- runs.py: a run read the one way the loop ran it: what each request sent, for every view;
- replay.py: --replay, a stand-in client that answers with a transcript's recorded replies;
- pauses.py: a run that pauses for a yes, and goes on once the person has said it;
- page.py: a run shown, as text (--show) and as one page (--html);
- cli.py: the command line around run().
"""
