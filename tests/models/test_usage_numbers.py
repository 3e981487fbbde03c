"""Token counts a provider's server sends are checked before they count: each adapter,
against a real loopback server replaying its recorded stream with the usage numbers
rewritten to negative, null, missing, fractional, textual, NaN and huge ones."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from tether.errors import ModelError, TetherError, UsageEstimatedWarning
from tether.models.usage import MOST_TOKENS

from .faults import Reply
from .test_bedrock import converse_stream
from .test_faults import WIRES, Wire, _run

MISSING = object()


# llama-cpp-python's server sends no usage to rewrite (its replies are estimated: see
# test_chat_servers.py); the "chat" wire reads the same counts the same way.
COUNTED = [w for w in WIRES if w.name != "llama-cpp"]


@pytest.fixture(params=COUNTED, ids=[w.name for w in COUNTED])
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param  # type: ignore[no-any-return]


# The names each wire's recorded text stream gives its input and output counts.
_COUNTS: dict[str, tuple[list[str], list[str]]] = {
    "anthropic": (["input_tokens"], ["output_tokens"]),
    "chat": (["prompt_tokens"], ["completion_tokens"]),
    "azure": (["prompt_tokens"], ["completion_tokens"]),
    "responses": (["input_tokens"], ["output_tokens"]),
    "azure-responses": (["input_tokens"], ["output_tokens"]),
    "google": (["promptTokenCount"], ["candidatesTokenCount", "thoughtsTokenCount"]),
}


def _stream(wire: Wire, input_value: object, output_value: object) -> bytes:
    """The wire's recorded answer "ok", its counts rewritten (given a made-up name when
    the count is to be missing)."""
    if wire.name == "bedrock":  # framed and checksummed: built again
        usage: dict[str, Any] = {"inputTokens": input_value, "outputTokens": output_value}
        usage = {k: v for k, v in usage.items() if v is not MISSING}
        return converse_stream("ok", usage={**usage, "totalTokens": 1})  # {} is the default
    body = wire.text("ok").decode()
    inputs, outputs = _COUNTS[wire.name]
    for names, value in ((inputs, input_value), (outputs, output_value)):
        for name in names:
            count = re.compile(f'"{name}": [0-9]+')
            assert count.search(body), (wire.name, name)
            written = f'"not_{name}": 0' if value is MISSING else f'"{name}": {json.dumps(value)}'
            body = count.sub(written, body)
    return body.encode()


# google-genai validates the whole reply with pydantic: a count that is not an int
# (NaN, a fraction, a float too large) makes the reply unreadable, a clean ModelError.
SDK_REFUSES = {("google", "nan"), ("google", "fraction"), ("google", "huge-float")}


def _refused(wire: Wire, case: str, error: TetherError | None) -> bool:
    """Whether the SDK refused the reply (see SDK_REFUSES), as a readable ModelError."""
    if (wire.name, case) not in SDK_REFUSES:
        assert error is None, error
        return False
    assert isinstance(error, ModelError)
    assert "sent a reply tether could not read" in str(error)
    return True


BAD = [
    pytest.param(-3_100_000, "negative", id="negative"),
    pytest.param(None, "null", id="null"),
    pytest.param(MISSING, "missing", id="missing"),
    pytest.param(float("nan"), "nan", id="nan"),
    pytest.param("-7", "negative-text", id="negative-text"),
]


@pytest.mark.parametrize(("value", "case"), BAD)
async def test_a_count_that_is_none_is_estimated_never_negative_or_free(
    wire: Wire, tmp_path: Path, value: object, case: str
) -> None:
    body = _stream(wire, value, value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, error, _, history = await _run(wire, [Reply(body=body)], tmp_path)
    if _refused(wire, case, error):
        return
    usage = result.usage
    assert result.output == "ok"
    assert usage.input_tokens >= 1  # the prompt's characters, four a token
    assert usage.output_tokens >= 1
    assert min(usage.cache_read_tokens, usage.cache_write_tokens) >= 0
    assert all(type(n) is int for n in (usage.input_tokens, usage.output_tokens))
    assert history[-1].usage == usage  # recorded as counted, and loadable
    assert any(issubclass(w.category, UsageEstimatedWarning) for w in caught)


@pytest.mark.parametrize(
    ("value", "counted", "case"),
    [
        pytest.param(3.2, 4, "fraction", id="fraction"),
        pytest.param("120", 120, "text", id="text"),
        pytest.param(10**30, MOST_TOKENS, "huge", id="huge"),
        pytest.param(1e300, MOST_TOKENS, "huge-float", id="huge-float"),
    ],
)
async def test_a_count_that_is_a_number_counts_rounded_up_and_bounded(
    wire: Wire, tmp_path: Path, value: object, counted: int, case: str
) -> None:
    result, error, _, _ = await _run(wire, [Reply(body=_stream(wire, value, 5))], tmp_path)
    if _refused(wire, case, error):
        return
    assert result.output == "ok"
    assert result.usage.input_tokens == counted
