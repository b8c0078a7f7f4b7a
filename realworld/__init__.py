"""What the lesson's loop needs to work in the real world, kept out of agent.py.

agent.py holds the loop, tools.py the tools, config.py the settings. This folder holds the rest:
- replies.py: the client run() talks to: a whole, honest reply from whatever a server sends;
- dialects.py: tool calls and thinking that models write as text, read back;
- transcripts.py: every run written down as it happens, read back to show, replay or resume;
- guards.py: what untrusted text passes on its way to the person (escapes shown) and the model
  (the key hidden, the length bounded);
- sandbox.py: --sandbox, every command confined by the operating system;
- protected.py: what no tool call may change (configuration, the agent's own code), and what a
  command made of it moved aside, never deleted;
- processes.py: a command's output read as it comes, and no process outliving its command;
- cli.py: the command line around run().
"""
