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

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from threadloom.errors import ThreadloomError
from threadloom.messages import ToolMessage

STRUCTURED_EXIT = "structured_response"


class StructuredOutputError(ThreadloomError, ValueError):
    """The model's structured reply could not be validated against the schema.

    Attributes:
        schema_name: the schema's name.
        raw: the text or arguments the model gave.
    """

    def __init__(self, message: str, *, schema_name: str, raw: Any) -> None:
        super().__init__(message)
        self.schema_name = schema_name
        self.raw = raw


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
        doc = (self.schema.__doc__ or "").strip()
        description = doc or f"Return the final answer as a {self.schema.__name__} object."
        return {"type": "function", "function": {
            "name": self.name, "description": description,
            "parameters": self.schema.model_json_schema()}}

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
        name = re.sub(r"[^a-zA-Z0-9_-]", "_", self.schema.__name__)[:64]
        return {"type": "json_schema", "json_schema": {
            "name": name, "schema": self.schema.model_json_schema(), "strict": self.strict}}

    def parse(self, text: str) -> BaseModel:
        """Validate the reply text (JSON, optionally inside a ``` fence).

        Raises:
            StructuredOutputError: the text is not JSON or does not match the schema.
        """
        body = text.strip()
        fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL)
        if fenced:
            body = fenced.group(1)
        try:
            return self.schema.model_validate_json(body)
        except ValidationError as exc:
            raise StructuredOutputError(
                f"the model's reply does not match {self.schema.__name__}: {_problems(exc)}; "
                f"reply: {text[:200]!r}", schema_name=self.schema.__name__, raw=text,
            ) from exc


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


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        for err in exc.errors()
    ) or json.dumps(str(exc))


__all__ = [
    "STRUCTURED_EXIT", "ProviderStrategy", "Strategy", "StructuredOutputError", "ToolStrategy",
    "resolve_strategy",
]
