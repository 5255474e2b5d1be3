"""Tools: ``@tool``, ``Tool``, JSON schema from signatures, and injected arguments.

A tool wraps a sync or async function. Its parameters become a pydantic model (the
arguments the model must send) and an OpenAI ``parameters`` JSON schema, as LangChain's
``@tool`` does: ``Annotated[T, "description"]``, ``Annotated[T, Field(...)]``,
``Literal[...]`` enums, defaults, nested pydantic models, and a Google-style docstring
(summary = description, ``Args:`` = per-parameter descriptions).

Parameters marked ``InjectedState``, ``InjectedToolCallId``, ``InjectedConfig`` (or simply
named ``config``), ``InjectedIdempotencyKey``, and parameters typed ``ToolRuntime`` are
filled by the engine, are absent from the schema, and cannot be set by the model:
arguments of those names are dropped.

This package only re-exports; the code lives in ``markers`` (injected arguments),
``schema`` (signature and docstring -> argument model -> JSON schema) and ``core``
(``Tool``, ``@tool``, ``format_tool_output``).
"""

from __future__ import annotations

# Private helpers are re-exported (``x as x``) so imports written before the split work.
from threadloom.tools.core import Tool, format_tool_output, tool
from threadloom.tools.core import _make_tool as _make_tool
from threadloom.tools.markers import _MARKERS as _MARKERS
from threadloom.tools.markers import (
    InjectedConfig,
    InjectedIdempotencyKey,
    InjectedState,
    InjectedToolCallId,
)
from threadloom.tools.markers import _injected_value as _injected_value
from threadloom.tools.markers import _injection as _injection
from threadloom.tools.markers import _pack as _pack
from threadloom.tools.runtime import ToolRuntime
from threadloom.tools.schema import _ARG_LINE as _ARG_LINE
from threadloom.tools.schema import _SECTION as _SECTION
from threadloom.tools.schema import _build_args_model as _build_args_model
from threadloom.tools.schema import _clean_schema as _clean_schema
from threadloom.tools.schema import _field_spec as _field_spec
from threadloom.tools.schema import _parse_docstring as _parse_docstring

__all__ = [
    "InjectedConfig",
    "InjectedIdempotencyKey",
    "InjectedState",
    "InjectedToolCallId",
    "Tool",
    "ToolRuntime",
    "format_tool_output",
    "tool",
]
