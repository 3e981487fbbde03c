"""The model the examples use: a real one when a key is set, else the scripted turns.

ANTHROPIC_API_KEY=... python examples/code_review.py   # Claude
OPENAI_API_KEY=... python examples/code_review.py      # GPT
python examples/code_review.py                         # scripted: no key, no network
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tether.models import Model, ScriptedModel, infer_model
from tether.models.scripted import Turn


def pick(turns: Sequence[Turn]) -> Model:
    """A real model if a provider key is in the environment, else `turns` scripted."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return infer_model("anthropic:claude-sonnet-4-5")
    if os.environ.get("OPENAI_API_KEY"):
        return infer_model("openai:gpt-5.2")
    return ScriptedModel(turns)
