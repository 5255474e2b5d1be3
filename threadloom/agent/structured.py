"""``response_format``: a validated structured response at the end of an agent run.

Two strategies, as LangChain's ``create_agent``:

- ``ToolStrategy(Schema)``: the model is offered one more tool whose arguments are the
  schema; when it calls that tool, the arguments are validated into
  ``structured_response`` and the run ends (exit reason ``"structured_response"``). A
  call that fails validation is answered with an error tool message naming the problems,
  so the model can try again.
- ``ProviderStrategy(Schema)``: the model is asked for JSON through the provider's
  ``response_format={"type": "json_schema", ...}``; the reply's text is parsed and
  validated. Used when the model declares ``supports_structured_output = True``.

A bare pydantic model class picks the provider strategy when the model supports it, else
the tool strategy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from threadloom.messages import ToolMessage
from threadloom.models.structured_output import (
    StructuredOutputError,
    parse_json_text,
    schema_response_format,
    schema_tool,
)
from threadloom.models.structured_output import problems as _problems

STRUCTURED_EXIT = "structured_response"


@dataclass(frozen=True, slots=True)
class ToolStrategy:
    """Structured output through a synthetic tool (as LangChain's ``ToolStrategy``).

    Args:
        schema: a pydantic model class.
        tool_name: the synthetic tool's name (default: the class name).
    """

    schema: type[BaseModel]
    tool_name: str | None = None

    @property
    def name(self) -> str:
        """The synthetic tool's name."""
        return self.tool_name or re.sub(r"[^a-zA-Z0-9_-]", "_", self.schema.__name__)[:64]

    def tool_dict(self) -> dict[str, Any]:
        """The OpenAI ``tools[]`` entry offered to the model."""
        return schema_tool(self.schema, self.name)

    def answer(self, call: dict[str, Any]) -> tuple[ToolMessage, BaseModel | None]:
        """Validate a call of the synthetic tool: ``(tool message, value or None)``."""
        call_id, args = call.get("id") or "", call.get("args")
        try:
            value = self.schema.model_validate(args if isinstance(args, dict) else {})
        except ValidationError as exc:
            text = (f"Error: the arguments do not match {self.schema.__name__}: "
                    f"{_problems(exc)}. Call {self.name!r} again with corrected arguments.")
            return ToolMessage(content=text, tool_call_id=call_id, name=self.name,
                               status="error"), None
        text = f"Returning structured response: {value.model_dump_json()}"
        return ToolMessage(content=text, tool_call_id=call_id, name=self.name), value


@dataclass(frozen=True, slots=True)
class ProviderStrategy:
    """Structured output through the provider's JSON-schema mode (LangChain's ``ProviderStrategy``).

    Args:
        schema: a pydantic model class.
        strict: ask the provider for strict schema adherence.
    """

    schema: type[BaseModel]
    strict: bool = True

    def response_format(self) -> dict[str, Any]:
        """The OpenAI ``response_format`` dict sent with every model call."""
        return schema_response_format(self.schema, self.strict)

    def parse(self, text: str) -> BaseModel:
        """Validate the reply text (JSON, optionally inside a ``` fence).

        Raises:
            StructuredOutputError: the text is not JSON or does not match the schema.
        """
        return parse_json_text(self.schema, text)  # type: ignore[no-any-return]


Strategy = ToolStrategy | ProviderStrategy


def resolve_strategy(response_format: Any, model: Any) -> Strategy | None:
    """Turn ``create_agent(response_format=...)`` into a strategy.

    Raises:
        TypeError: not a pydantic model class or strategy, or a tool strategy for a
            model that cannot take tools.
    """
    if response_format is None:
        return None
    strategy = response_format
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        native = bool(getattr(model, "supports_structured_output", False))
        strategy = ProviderStrategy(response_format) if native else ToolStrategy(response_format)
    if not isinstance(strategy, ToolStrategy | ProviderStrategy):
        raise TypeError(
            "response_format must be a pydantic model class, ToolStrategy(...) or "
            f"ProviderStrategy(...), got {response_format!r}")
    if isinstance(strategy, ToolStrategy) and not getattr(model, "supports_tools", True):
        raise TypeError(
            f"response_format uses the tool strategy but model {model!r} cannot take tools; "
            "use a model with supports_structured_output=True or ProviderStrategy(...)")
    return strategy


__all__ = [
    "STRUCTURED_EXIT", "ProviderStrategy", "Strategy", "StructuredOutputError", "ToolStrategy",
    "resolve_strategy",
]
