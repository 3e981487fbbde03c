"""The model the examples use: a real one when a key is set, else the scripted turns.

ANTHROPIC_API_KEY=... python examples/code_review.py   # Claude
OPENAI_API_KEY=... python examples/code_review.py      # GPT
python examples/code_review.py                         # scripted: no key, no network
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.models import Model, ScriptedModel, default_model, infer_model
from tether.models.scripted import Turn


def pick(turns: Sequence[Turn]) -> Model:
    """A real model if a provider key is in the environment, else `turns` scripted.

    (These examples need more than the offline model can do, so without a key they
    replay scripted turns instead; `examples/demo.py` shows the offline model.)"""
    spec = default_model()
    return ScriptedModel(turns) if spec.startswith("local:") else infer_model(spec)
