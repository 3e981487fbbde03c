"""Models: the `Model` protocol, and `ScriptedModel` / `FunctionModel` for tests."""

from tether.models.base import (
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    StreamItem,
    ToolSpec,
    response_of,
)
from tether.models.prices import Price
from tether.models.scripted import FunctionModel, ScriptedModel, Turn

__all__ = [
    "FunctionModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Price",
    "ScriptedModel",
    "StreamDelta",
    "StreamItem",
    "ToolSpec",
    "Turn",
    "response_of",
]
