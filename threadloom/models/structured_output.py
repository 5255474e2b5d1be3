"""``model.with_structured_output(Schema)``: a model whose replies come back as ``Schema``
values, as LangChain's chat models give them.

Two methods, as LangChain's: ``"function_calling"`` offers one tool whose arguments are the
schema and forces the model to call it; ``"json_schema"`` asks the provider for JSON
through ``response_format={"type": "json_schema", ...}`` and parses the reply's text. The
default is ``"json_schema"`` for a model that declares ``supports_structured_output``
(the OpenAI adapter), else ``"function_calling"``.

A schema is a pydantic model class (replies are instances of it), a ``TypedDict`` class
or a JSON-schema dict (replies are dicts). The builders here (``schema_tool``,
``schema_response_format``, ``parse_json_text``) are also what ``create_agent``'s
``response_format`` strategies use.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from threadloom.engine.graph_api import portable_typeddict
from threadloom.errors import ThreadloomError
from threadloom.messages.types import AIMessage


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


def schema_name(schema: Any) -> str:
    """The schema's name as a tool or format name (``[a-zA-Z0-9_-]``, at most 64)."""
    raw = schema.get("title", "output") if isinstance(schema, dict) else schema.__name__
    return re.sub(r"[^a-zA-Z0-9_-]", "_", str(raw))[:64]


def _adapter(schema: Any) -> TypeAdapter[Any]:
    """A pydantic adapter for a ``TypedDict`` (a ``typing.TypedDict`` too: pydantic takes
    only ``typing_extensions``' before Python 3.12) or another type."""
    if isinstance(schema, type) and hasattr(schema, "__required_keys__"):
        schema = portable_typeddict(schema)
    return TypeAdapter(schema)


def json_schema_of(schema: Any) -> dict[str, Any]:
    """The JSON schema of a pydantic class, a ``TypedDict`` class or a schema dict."""
    if isinstance(schema, dict):
        return schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return _adapter(schema).json_schema()


def schema_tool(schema: Any, name: str | None = None) -> dict[str, Any]:
    """The OpenAI ``tools[]`` entry whose arguments are ``schema``."""
    doc = (schema.get("description", "") if isinstance(schema, dict)
           else (schema.__doc__ or "")).strip()
    tool_name = name or schema_name(schema)
    return {"type": "function", "function": {
        "name": tool_name,
        "description": doc or f"Return the final answer as a {schema_name(schema)} object.",
        "parameters": json_schema_of(schema)}}


def schema_response_format(schema: Any, strict: bool = True) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking for JSON that matches ``schema``."""
    return {"type": "json_schema", "json_schema": {
        "name": schema_name(schema), "schema": json_schema_of(schema), "strict": strict}}


def problems(exc: ValidationError) -> str:
    """A validation error's problems, one ``field: message`` each, ``; ``-joined."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        for err in exc.errors()
    ) or json.dumps(str(exc))


def validate(schema: Any, data: Any, raw: Any) -> Any:
    """``data`` as a ``schema`` value (a dict schema takes the data as is).

    Raises:
        StructuredOutputError: the data does not match the schema.
    """
    if isinstance(schema, dict):
        if not isinstance(data, dict):
            raise StructuredOutputError(f"expected a JSON object for {schema_name(schema)}, "
                                        f"got {data!r}"[:300], schema_name=schema_name(schema),
                                        raw=raw)
        return data
    try:
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_validate(data)
        return _adapter(schema).validate_python(data)
    except ValidationError as exc:
        raise StructuredOutputError(
            f"the model's reply does not match {schema_name(schema)}: {problems(exc)}; "
            f"reply: {str(raw)[:200]!r}", schema_name=schema_name(schema), raw=raw,
        ) from exc


def parse_json_text(schema: Any, text: str) -> Any:
    """Validate a reply's text (JSON, optionally inside a ``` fence) as ``schema``.

    Raises:
        StructuredOutputError: the text is not JSON or does not match the schema.
    """
    body = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise StructuredOutputError(
            f"the model's reply is not JSON for {schema_name(schema)}: {text[:200]!r}",
            schema_name=schema_name(schema), raw=text) from exc
    return validate(schema, data, text)


class StructuredChatModel:
    """``model`` answering with ``schema`` values (``model.with_structured_output``).

    Args:
        model: a threadloom chat model.
        schema: pydantic class, ``TypedDict`` class or JSON-schema dict.
        method: ``"function_calling"`` or ``"json_schema"`` (default: see the module).
        include_raw: return ``{"raw": AIMessage, "parsed": value | None,
            "parsing_error": exception | None}`` instead of raising on a bad reply.

    ``invoke``/``ainvoke`` raise ``StructuredOutputError`` for a reply that does not
    match (with ``include_raw=False``).
    """

    def __init__(self, model: Any, schema: Any, *, method: str | None = None,
                 include_raw: bool = False) -> None:
        if method is None:
            native = getattr(model, "supports_structured_output", False)
            method = "json_schema" if native else "function_calling"
        if method not in ("function_calling", "json_schema"):
            raise ValueError(f"with_structured_output: method must be 'function_calling' or "
                             f"'json_schema', got {method!r}")
        self.model, self.schema, self.method, self.include_raw = model, schema, method, include_raw
        if method == "function_calling":
            tool = schema_tool(schema)
            self._args: dict[str, Any] = {
                "tools": [tool],
                "tool_choice": {"type": "function", "function": {
                    "name": tool["function"]["name"]}}}
        else:
            self._args = {"response_format": schema_response_format(schema)}

    def _parse(self, reply: AIMessage) -> Any:
        if self.method == "json_schema":
            return parse_json_text(self.schema, reply.text)
        if not reply.tool_calls:
            raise StructuredOutputError(
                f"the model did not call {schema_name(self.schema)}; reply: {reply.text[:200]!r}",
                schema_name=schema_name(self.schema), raw=reply.text)
        args = reply.tool_calls[0]["args"]
        return validate(self.schema, args, args)

    def _result(self, reply: AIMessage) -> Any:
        if not self.include_raw:
            return self._parse(reply)
        try:
            return {"raw": reply, "parsed": self._parse(reply), "parsing_error": None}
        except StructuredOutputError as exc:
            return {"raw": reply, "parsed": None, "parsing_error": exc}

    def invoke(self, messages: Any, **kwargs: Any) -> Any:
        """Call the model; return its reply as a ``schema`` value (see the class)."""
        return self._result(self.model.invoke(messages, **self._args, **kwargs))

    async def ainvoke(self, messages: Any, **kwargs: Any) -> Any:
        """Async twin of ``invoke``."""
        return self._result(await self.model.ainvoke(messages, **self._args, **kwargs))
