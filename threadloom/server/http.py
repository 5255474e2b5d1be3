"""Request and response plumbing shared by the routes: JSON bodies in (size-limited,
validated by a pydantic model), JSON out, and the errors every route may answer.

Every error body is ``{"detail": ...}`` as LangGraph's server sends it: 404 names the
assistant, thread or run that does not exist; 422 names the field that failed
validation (or says the JSON is invalid); 409 is a busy thread under
``multitask_strategy="reject"``; 413 a body over the limit.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from threadloom.server.wire import dumps

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_BODY = 10 * 1024 * 1024  # bytes


class ApiError(Exception):
    """An HTTP error answer: ``status`` and the ``detail`` of its JSON body.

    Args:
        status: the HTTP status code.
        detail: what went wrong, for the client (never a traceback).
        headers: extra response headers.
    """

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}


def not_found(kind: str, ident: str) -> ApiError:
    """404 naming what was not found: ``Thread with ID ... not found``."""
    return ApiError(404, f"{kind} with ID {ident} not found")


class JSON(Response):
    """A JSON response written with the server's encoder (``wire.dumps``)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content).encode("utf-8")


def error_response(exc: ApiError) -> Response:
    """The JSON answer of an ``ApiError``."""
    return JSON({"detail": exc.detail}, status_code=exc.status, headers=exc.headers)


async def read_json(request: Request, max_bytes: int = DEFAULT_MAX_BODY,
                    *, allow_empty: bool = False) -> Any:
    """The request's JSON body.

    Args:
        request: the incoming request.
        max_bytes: the largest body accepted.
        allow_empty: an empty body reads as ``{}`` instead of failing.

    Raises:
        ApiError: 413 for a body over ``max_bytes``; 422 for a body that is not JSON
            (or empty, unless ``allow_empty``).
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise ApiError(413, f"request body over the limit of {max_bytes} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise ApiError(413, f"request body over the limit of {max_bytes} bytes")
    if not body.strip():
        if allow_empty:
            return {}
        raise ApiError(422, "Invalid JSON in request body")
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except RecursionError as exc:
        raise ApiError(422, f"JSON in request body nested over {MAX_DEPTH} levels") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(422, "Invalid JSON in request body") from exc
    # cheap tests on the raw bytes first: the walk runs only when it could find something
    deep = body.count(b"[") + body.count(b"{") > MAX_DEPTH
    if deep or _SURROGATE.search(body):
        check_json(data)
    return data


MAX_DEPTH = 256  # arrays and objects inside one another in a request body
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def check_json(data: Any) -> None:
    """Refuse a parsed body nested over ``MAX_DEPTH`` levels or holding a lone UTF-16
    surrogate (``"\\ud800"``: no UTF-8 text can carry it), walking it without recursion.

    Raises:
        ApiError: 422 naming the problem.
    """
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise ApiError(422, f"JSON in request body nested over {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key)
                stack.append((item, depth + 1))
        else:
            stack.extend((item, depth + 1) for item in value)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(422, f"JSON in request body has a lone surrogate "
                            f"(\\u{ord(text[exc.start]):04x}) in a string: not valid "
                            "Unicode") from exc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def validate(model: type[M], data: Any) -> M:
    """``data`` validated as ``model``.

    Raises:
        ApiError: 422 naming the first field that failed and why, e.g.
            ``"limit: Input should be a valid integer"``.
    """
    if not isinstance(data, dict):
        raise ApiError(422, f"the request body must be a JSON object, not {_kind(data)}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, describe_validation(exc)) from exc


def describe_validation(exc: ValidationError) -> str:
    """One line per failed field: ``field.path: message``."""
    lines = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        lines.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(lines)


async def body_as(request: Request, model: type[M], max_bytes: int = DEFAULT_MAX_BODY,
                  *, allow_empty: bool = False) -> M:
    """Read the JSON body and validate it as ``model`` (see ``read_json``, ``validate``)."""
    return validate(model, await read_json(request, max_bytes, allow_empty=allow_empty))


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", type(None): "null", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def query_int(request: Request, name: str, default: int, *, low: int = 0,
              high: int = 10_000) -> int:
    """An integer query parameter within ``[low, high]``.

    Raises:
        ApiError: 422 naming the parameter when it is not an integer in range.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ApiError(422, f"{name}: must be an integer, got {raw!r}") from exc
    if not low <= value <= high:
        raise ApiError(422, f"{name}: must be between {low} and {high}, got {value}")
    return value


def query_bool(request: Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter (``1/0``, ``true/false``, ``yes/no``).

    Raises:
        ApiError: 422 naming the parameter for any other text.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    low = raw.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ApiError(422, f"{name}: must be a boolean, got {raw!r}")
