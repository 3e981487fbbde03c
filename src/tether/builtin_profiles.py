"""The profiles tether ships for the model families it knows (see `tether.profiles`)."""

from __future__ import annotations

from tether.profiles import HarnessProfile, register_harness_profile

__all__ = ["register"]

_OPENAI = HarnessProfile(
    system_prompt_suffix=(
        "Act rather than ask: when the next step is clear, call the tool instead of "
        "describing it or asking for permission, and keep going until the task is done."
    )
)
_ANTHROPIC = HarnessProfile(
    system_prompt_suffix=(
        "Make independent tool calls in the same turn, and do not repeat what a tool "
        "result already shows."
    )
)

_LOCAL = HarnessProfile(
    base_system_prompt="""\
You are an assistant that does tasks with tools. Do exactly what the user asks, then finish.
Copy file names and text from the task exactly.

Example. Task: Call write_file with file_path /plan.txt and content "Step one", then finish.
Replies, one per turn:
{"tool": "write_file", "args": {"file_path": "/plan.txt", "content": "Step one"}}
{"tool": "finish", "args": {"answer": "Done."}}""",
    excluded_tools=frozenset({"glob", "grep"}),
    excluded_capabilities=frozenset({"Todos", "Subagents", "LocalContext"}),
)
"""Tiny on-device models (`local:`): a short prompt with one worked example (a 135M
model copies an example far better than it follows a rule; its answer says nothing a
copy could make untrue), the basic file tools (`edit_file` for the edits it makes
exactly), and no planning or delegation it cannot use. With only those tools, the
offline model reads plain requests its own way (see `tether.models._plain`) and this
prompt is not sent."""


def register() -> None:
    """Register the built-in profiles (called once, before entry points are loaded)."""
    register_harness_profile("openai", _OPENAI)
    register_harness_profile("azure", _OPENAI)  # OpenAI's models, deployed on Azure
    register_harness_profile("anthropic", _ANTHROPIC)
    register_harness_profile("local", _LOCAL)
