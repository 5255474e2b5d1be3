"""What ``ToolNode`` makes of a failed call: the texts the model reads and the
``handle_tool_errors`` policy (which exceptions become messages, which are raised).

The texts are LangGraph's (``ToolNode``'s templates), so code and tests that read them
work unchanged; an invalid-arguments text also gives the tool's JSON schema, so a small
model can fix its call.
"""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Callable
from typing import Any, Union, get_args, get_origin, get_type_hints

from pydantic import ValidationError

from threadloom.errors import ToolError, ToolException, ToolInvocationError
from threadloom.redact import mask_urls

ErrorHandler = (bool | str | Callable[..., str] | type[Exception]
                | tuple[type[Exception], ...])


TOOL_CALL_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."
"""The text of a tool's exception under ``handle_tool_errors=True`` (LangGraph's)."""


def unknown_tool_text(name: str, available: list[str]) -> str:
    """LangGraph's text for a call of a tool the node does not have."""
    return f"Error: {name} is not a valid tool, try one of [{', '.join(available)}]."


def invocation_error(name: str, args: Any, exc: ToolError, schema: dict[str, Any]
                     ) -> ToolInvocationError:
    """A ``ToolInvocationError`` for arguments that failed ``Tool.parse_args``.

    Its message is LangGraph's (``Error invoking tool 'NAME' with kwargs {...} with
    error:`` then one ``field: problem`` line per validation error), followed by the
    JSON schema the arguments must match.
    """
    cause = exc.__cause__
    if isinstance(cause, ValidationError):
        lines = "\n".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                          for err in cause.errors())
    else:
        lines = str(exc)
    text = (f"Error invoking tool '{name}' with kwargs {args!r} with error:\n {lines}\n"
            " Please fix the error and try again. The arguments must be one JSON object "
            f"matching this schema: {json.dumps(schema, ensure_ascii=False)}")
    error = ToolInvocationError(name, exc, args, text)
    error.__cause__ = exc
    return error


def default_handler(exc: Exception) -> str:
    """``ToolNode``'s default ``handle_tool_errors``, as LangGraph's: invalid arguments
    become the invocation text; an exception of the tool's own code is raised.

    Raises:
        Exception: ``exc``, when it is not a ``ToolInvocationError``.
    """
    if isinstance(exc, ToolInvocationError):
        return exc.message
    raise exc


def handled_types(handler: Any) -> tuple[type[BaseException], ...]:
    """The exception types ``handler`` covers (LangGraph's rules): an exception class
    or a tuple of them as given; a callable's first parameter's annotation (a class or
    a union of classes; none: every ``Exception``); ``True``/a string: every one.

    Raises:
        ValueError: a callable annotated with something that is not an exception class.
    """
    if isinstance(handler, type) and issubclass(handler, Exception):
        return (handler,)
    if isinstance(handler, tuple):
        return handler
    if callable(handler) and not isinstance(handler, type):
        return _annotated_types(handler)
    return (Exception,)


def _annotated_types(handler: Callable[..., Any]) -> tuple[type[BaseException], ...]:
    try:
        params = list(inspect.signature(handler).parameters.values())
        hints = get_type_hints(handler)
    except (TypeError, ValueError, NameError):
        return (Exception,)
    if params and params[0].name in ("self", "cls") and len(params) == 2:
        params = params[1:]
    if not params or params[0].name not in hints:
        return (Exception,)
    hint = hints[params[0].name]
    kinds = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    if not all(isinstance(k, type) and issubclass(k, BaseException) for k in kinds):
        raise ValueError(f"handle_tool_errors: {handler!r} must be annotated with "
                         f"exception types, got {hint!r}")
    return tuple(kinds)


def error_text(exc: Exception, handler: ErrorHandler) -> str:
    """The error message's text for ``exc``, or raise it when ``handler`` leaves it out.

    ``True``, an exception class or a tuple give ``Error: <repr(exc)>`` and LangGraph's
    "Please fix your mistakes." (a ``ToolInvocationError``: its own text); a string is
    used as is; a callable is called with ``exc``. Known credentials in URLs are masked:
    the text goes to the model and into the state.

    As LangGraph's ``ToolNode``, a ``ToolInvocationError`` (the model's arguments failed
    validation) is raised too when ``handler`` does not cover it; ``default_handler``
    (``ToolNode``'s default) answers it and raises everything else.

    Raises:
        Exception: ``exc`` itself, when ``handler`` is ``False`` or does not cover it.
    """
    if handler is False or not isinstance(exc, handled_types(handler)):
        raise exc
    if isinstance(handler, str):
        return handler
    if callable(handler) and not isinstance(handler, type):
        return str(handler(exc))
    if isinstance(exc, ToolInvocationError):
        return exc.message
    return mask_urls(TOOL_CALL_ERROR_TEMPLATE.format(error=repr(exc)))


def own_error_text(exc: ToolException, flag: Any) -> str:
    """The text of a ``ToolException`` a tool answers itself (its ``handle_tool_error``,
    as LangChain's): ``True`` -> the exception's message, a string as is, a callable
    called with the exception."""
    if isinstance(flag, str):
        return flag
    if callable(flag):
        return str(flag(exc))
    return str(exc.args[0]) if exc.args else "Tool execution error"


__all__ = ["TOOL_CALL_ERROR_TEMPLATE", "ErrorHandler", "default_handler", "error_text",
           "handled_types", "invocation_error", "own_error_text", "unknown_tool_text"]
