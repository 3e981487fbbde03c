"""Models: the `Model` protocol, model strings, and `ScriptedModel` / `FunctionModel` for tests.

Provider adapters live in their own modules so their SDKs load only when used:
`tether.models.anthropic`, `tether.models.openai` (Azure too), `tether.models.google`,
`tether.models.bedrock`, `tether.models.langchain`, and `tether.models.local` for the
offline model that runs on this machine.

The provider adapters retry rate limits, server errors, refused or dropped
connections and timeouts themselves (their SDKs' retries are off), with backoff, and
wait as long as a `retry-after` asks up to `MAX_RETRY_WAIT_SECONDS`; a fault left over
raises a `ModelError` naming the URL, the provider's request id and the retries made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_names

if TYPE_CHECKING:
    from tether.models._sdk import MAX_RETRY_WAIT_SECONDS
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
    from tether.models.fallback import FallbackModel
    from tether.models.prices import Price
    from tether.models.profiles import ModelProfile, profile_for
    from tether.models.resolve import OFFLINE_NOTICE, default_model, infer_model
    from tether.models.scripted import FunctionModel, ScriptedModel, Turn

__all__ = [
    "MAX_RETRY_WAIT_SECONDS",
    "OFFLINE_NOTICE",
    "FallbackModel",
    "FunctionModel",
    "Model",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Price",
    "ScriptedModel",
    "StreamDelta",
    "StreamItem",
    "ToolSpec",
    "Turn",
    "default_model",
    "infer_model",
    "profile_for",
    "response_of",
]

# The names load on first use (PEP 562): a module of this package imported on its own
# (`tether.models.base`, which every agent needs) does not load the others, such as the
# provider adapters' shared helpers in `_sdk`.
_HOMES = {
    "MAX_RETRY_WAIT_SECONDS": "_sdk",
    "Model": "base",
    "ModelRequest": "base",
    "ModelResponse": "base",
    "ModelSettings": "base",
    "StreamDelta": "base",
    "StreamItem": "base",
    "ToolSpec": "base",
    "response_of": "base",
    "FallbackModel": "fallback",
    "Price": "prices",
    "ModelProfile": "profiles",
    "profile_for": "profiles",
    "OFFLINE_NOTICE": "resolve",
    "default_model": "resolve",
    "infer_model": "resolve",
    "FunctionModel": "scripted",
    "ScriptedModel": "scripted",
    "Turn": "scripted",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _HOMES)
