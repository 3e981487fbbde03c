"""The final answer: plain text, or a value of `output_type` given through `final_result`."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tether import prompts
from tether.errors import ConfigurationError
from tether.messages import ToolCall
from tether.models.base import ToolSpec
from tether.tools.tool import decode_args, validation_message

if TYPE_CHECKING:
    import pydantic

__all__ = ["FINAL_RESULT", "OutputSpec"]

FINAL_RESULT = "final_result"
_WRAPPED = "result"
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*?)\n?```$", re.DOTALL)


class OutputSpec:
    """How an agent's final answer is given and checked.

    For `str` the answer is the model's closing text. For any other type pydantic can
    validate, the model calls `final_result` with the answer as arguments; types whose
    schema is not an object (say `list[int]`) are wrapped in a `result` field.
    """

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        self.structured = output_type is not str
        self.tool: ToolSpec | None = None
        self._wrapped = False
        if not self.structured:
            return
        import pydantic  # an agent answering in text loads none (so its first build is quick)

        try:
            self._adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
            schema = self._adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise ConfigurationError(
                f"output_type {output_type!r} cannot be described as a JSON schema: {exc}"
            ) from exc
        if schema.get("type") != "object":
            self._wrapped = True
            defs = schema.pop("$defs", None)
            schema = {
                "type": "object",
                "properties": {_WRAPPED: schema},
                "required": [_WRAPPED],
                **({"$defs": defs} if defs else {}),
            }
        self.tool = ToolSpec(FINAL_RESULT, prompts.text("final_result_tool"), schema)

    def validate_call(self, call: ToolCall) -> tuple[Any, str | None]:
        """The answer in a `final_result` call, or the error to send back to the model."""
        args = decode_args(FINAL_RESULT, call.args)
        if isinstance(args, str):
            return None, args
        return self._validate(args)

    def validate_text(self, text: str) -> tuple[Any, bool]:
        """Accept a text reply that is itself a valid JSON answer (fences allowed)."""
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1)
        try:
            args = json.loads(body)
        except json.JSONDecodeError:
            return None, False
        if not isinstance(args, dict):
            return None, False
        value, error = self._validate(args)
        return value, error is None

    def _validate(self, args: dict[str, Any]) -> tuple[Any, str | None]:
        import pydantic  # loaded already, with the adapter

        try:
            if self._wrapped:
                return self._adapter.validate_python(args[_WRAPPED]), None
            return self._adapter.validate_python(args), None
        except KeyError:
            return (
                None,
                f"Invalid arguments for '{FINAL_RESULT}': the field '{_WRAPPED}' is missing.",
            )
        except pydantic.ValidationError as exc:
            return None, validation_message(FINAL_RESULT, exc)
