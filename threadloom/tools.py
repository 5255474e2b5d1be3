"""Tools: ``@tool``, ``Tool``, JSON schema from signatures, and injected arguments.

A tool wraps a sync or async function. Its parameters become a pydantic model (the
arguments the model must send) and an OpenAI ``parameters`` JSON schema, as LangChain's
``@tool`` does: ``Annotated[T, "description"]``, ``Annotated[T, Field(...)]``,
``Literal[...]`` enums, defaults, nested pydantic models, and a Google-style docstring
(summary = description, ``Args:`` = per-parameter descriptions).

Parameters marked ``InjectedState``, ``InjectedToolCallId``, ``InjectedConfig`` (or simply
named ``config``) and ``InjectedIdempotencyKey`` are filled by the engine, are absent from
the schema, and cannot be set by the model: arguments of those names are dropped.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from threadloom.engine.errors import ToolError

__all__ = [
    "InjectedConfig",
    "InjectedIdempotencyKey",
    "InjectedState",
    "InjectedToolCallId",
    "Tool",
    "format_tool_output",
    "tool",
]


class InjectedState:
    """Marks a parameter the engine fills with the graph state, hidden from the model.

    As LangGraph's ``InjectedState``: ``state: Annotated[dict, InjectedState]`` receives
    the whole state; ``Annotated[str, InjectedState("user_id")]`` receives one key (an
    item of a dict state, or an attribute of an object state; ``None`` when absent).

    Args:
        field: the state key to inject, or None for the whole state.
    """

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def __repr__(self) -> str:
        return f"InjectedState({self.field!r})"


class InjectedToolCallId:
    """Marks a parameter that receives the id of the tool call being run (a ``str``)."""


class InjectedConfig:
    """Marks a parameter that receives the run config dict (as LangChain's ``RunnableConfig``).

    A parameter named ``config`` is treated as marked, as in LangChain.
    """


class InjectedIdempotencyKey:
    """Marks a parameter that receives a stable key for this call (a ``str``).

    The key is ``"{thread_id}:{checkpoint_id}:{tool_call_id}"`` when the run has a
    checkpointer (so a call re-run after a crash gets the same key), else the tool call id.
    Pass it to external systems that deduplicate requests.
    """


_MARKERS = (InjectedState, InjectedToolCallId, InjectedConfig, InjectedIdempotencyKey)
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description})."""
    if not doc:
        return "", {}
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1).lstrip("*")
            params[current] = match.group(2).strip()
        elif current:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params


def _injection(name: str, annotation: Any) -> Any:
    """Return the injection marker of a parameter (class or instance), or None."""
    candidates = [annotation]
    if get_origin(annotation) is Annotated:
        candidates = [get_args(annotation)[0], *annotation.__metadata__]
    for item in candidates:
        if any(item is marker for marker in _MARKERS) or isinstance(item, _MARKERS):
            return item
        if getattr(item, "__name__", "") == "RunnableConfig":
            return InjectedConfig
    return InjectedConfig if name == "config" else None


def _field_spec(annotation: Any, default: Any, doc: str | None) -> tuple[Any, Any]:
    """Turn one parameter into a ``create_model`` field spec ``(annotation, default)``."""
    base, metadata = annotation, []
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
    description = doc
    kept: list[Any] = []
    for item in metadata:
        if isinstance(item, str):
            description = item
        else:
            kept.append(item)
    has_desc = any(isinstance(m, FieldInfo) and m.description for m in kept)
    if description and not has_desc:
        kept.append(Field(description=description))
    spec = Annotated[(base, *kept)] if kept else base  # type: ignore[valid-type]
    return spec, (... if default is inspect.Parameter.empty else default)


def _build_args_model(
    name: str, func: Callable[..., Any], param_docs: dict[str, str], given: Any = None
) -> tuple[type[BaseModel], dict[str, Any], dict[str, str]]:
    """Build (args model, {param: injection marker}, {param: model field name}).

    With ``given`` (a user's ``args_schema``) only the injected parameters are taken from
    the signature, and the model is ``given``.
    """
    try:
        hints = get_type_hints(func, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"tool {name!r}: cannot resolve type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    injected: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    for pname, param in inspect.signature(func).parameters.items():
        annotation = hints.get(pname, Any)
        marker = _injection(pname, annotation)
        if marker is not None:
            injected[pname] = marker
        elif param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD) and given is None:
            spec, default = _field_spec(annotation, param.default, param_docs.get(pname))
            fname = pname
            if pname.startswith("_") or hasattr(BaseModel, pname):
                fname = f"field_{len(fields)}_{pname.lstrip('_')}"
                spec = Annotated[spec, Field(alias=pname)]
            fields[fname] = (spec, default)
            field_names[pname] = fname
    if given is not None:
        if not (isinstance(given, type) and issubclass(given, BaseModel)):
            raise TypeError(f"tool {name!r}: args_schema must be a pydantic model class")
        return given, injected, {(f.alias or n): n for n, f in given.model_fields.items()}
    config = ConfigDict(extra="ignore", protected_namespaces=())
    try:
        model = create_model(f"{name}_args", __config__=config, **fields)
        model.model_json_schema()
    except Exception as exc:  # pydantic raises several types for unsupported annotations
        raise TypeError(f"tool {name!r}: cannot build an argument schema: {exc}") from exc
    return model, injected, field_names


def _clean_schema(node: Any, defs: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
    """Drop pydantic titles and inline ``$ref``s (recursive models keep one ``$ref`` level)."""
    if isinstance(node, list):
        return [_clean_schema(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.rsplit("/", 1)[-1]
        if key in seen or key not in defs:
            return {"type": "object"}
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return {**_clean_schema(defs[key], defs, seen | {key}), **_clean_schema(extra, defs, seen)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key in ("default", "enum", "const", "examples"):
            out[key] = value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {p: _clean_schema(s, defs, seen) for p, s in value.items()}
        else:
            out[key] = _clean_schema(value, defs, seen)
    return out


def format_tool_output(value: Any) -> str:
    """Turn a tool's return value into ToolMessage content.

    A ``str`` is kept as is; ``None`` becomes ``""``; anything else is JSON-encoded
    (pydantic models as ``model_dump(mode="json")``, dataclasses, datetimes, UUIDs and
    sets as pydantic encodes them; unknown objects as ``str(obj)``).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)


class Tool:
    """A callable the model may ask for, with its argument schema.

    As LangChain's ``StructuredTool``. Build one with ``@tool`` or directly.

    Args:
        name: the name the model calls (``^[a-zA-Z0-9_-]{1,64}$``, as OpenAI requires).
        description: what the tool does, shown to the model.
        func: the sync implementation (``**kwargs -> Any``).
        coroutine: the async implementation; at least one of func/coroutine is required.
        args_schema: a pydantic model for the arguments; default: built from the signature.
        return_direct: end the agent run with this tool's result.

    Raises:
        ValueError: bad name, or neither func nor coroutine given.
        TypeError: a parameter type pydantic cannot turn into a JSON schema.
    """

    def __init__(
        self,
        name: str,
        description: str,
        func: Callable[..., Any] | None = None,
        coroutine: Callable[..., Awaitable[Any]] | None = None,
        args_schema: type[BaseModel] | None = None,
        return_direct: bool = False,
    ) -> None:
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name or ""):
            raise ValueError(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        impl = func or coroutine
        if impl is None:
            raise ValueError(f"tool {name!r} needs a func or a coroutine")
        self.name, self.description = name, description
        self.func, self.coroutine, self.return_direct = func, coroutine, return_direct
        _, param_docs = _parse_docstring(impl.__doc__)
        self.args_model, self._injected, self._field_names = _build_args_model(
            name, impl, param_docs, args_schema
        )
        self._schema: dict[str, Any] | None = None

    @property
    def injected_params(self) -> dict[str, Any]:
        """``{parameter name: marker}`` of the parameters the engine fills."""
        return dict(self._injected)

    def json_schema(self) -> dict[str, Any]:
        """The ``parameters`` JSON schema: ``{"type": "object", "properties", "required"}``."""
        if self._schema is None:
            raw = self.args_model.model_json_schema()
            cleaned = _clean_schema(raw, raw.get("$defs", {}))
            cleaned["type"] = "object"
            cleaned.setdefault("properties", {})
            cleaned.setdefault("required", [])
            self._schema = cleaned
        return json.loads(json.dumps(self._schema))

    @property
    def args(self) -> dict[str, Any]:
        """The ``properties`` of the JSON schema (as LangChain's ``BaseTool.args``)."""
        return self.json_schema()["properties"]

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions ``tools`` entry for this tool."""
        function = {"name": self.name, "description": self.description}
        return {"type": "function", "function": {**function, "parameters": self.json_schema()}}

    def parse_args(self, args: dict[str, Any]) -> BaseModel:
        """Validate the model's arguments (injected names are dropped first).

        Raises:
            ToolError: ``args`` is not a dict, or fails validation (``__cause__`` holds the
                pydantic ``ValidationError``; the message names each bad field).
        """
        if not isinstance(args, dict):
            raise ToolError(
                f"arguments for tool {self.name!r} must be a JSON object, "
                f"got {type(args).__name__}",
                tool_name=self.name,
            )
        clean = {k: v for k, v in args.items() if k not in self._injected}
        try:
            return self.args_model.model_validate(clean)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ToolError(
                f"invalid arguments for tool {self.name!r}: {problems}", tool_name=self.name
            ) from exc

    def _kwargs(self, validated: BaseModel, injections: dict[str, Any]) -> dict[str, Any]:
        kwargs = {p: getattr(validated, f) for p, f in self._field_names.items()}
        for pname, marker in self._injected.items():
            kwargs[pname] = _injected_value(marker, injections)
        return kwargs

    def invoke(
        self,
        args: dict[str, Any],
        *,
        state: Any = None,
        tool_call_id: str | None = None,
        config: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Validate ``args`` and run the tool; returns what the function returned.

        Args:
            args: the model's arguments (a dict); names of injected parameters are dropped.
            state: the graph state, for ``InjectedState`` parameters.
            tool_call_id: for ``InjectedToolCallId`` parameters.
            config: for ``InjectedConfig`` / ``config`` parameters (default ``{}``).
            idempotency_key: for ``InjectedIdempotencyKey`` (default: ``tool_call_id``).

        An async-only tool is run with ``asyncio.run`` (not allowed inside a running loop:
        use ``ainvoke`` there).

        Raises:
            ToolError: the arguments are not an object or fail validation.
            RuntimeError: an async-only tool invoked from a running event loop.
            Exception: whatever the tool itself raises, unchanged.
        """
        validated = self.parse_args(args)
        kwargs = self._kwargs(validated, _pack(state, tool_call_id, config, idempotency_key))
        if self.func is not None:
            return self.func(**kwargs)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.coroutine(**kwargs))  # type: ignore[arg-type,misc]
        raise RuntimeError(f"tool {self.name!r} is async-only; use 'await tool.ainvoke(...)'")

    async def ainvoke(
        self,
        args: dict[str, Any],
        *,
        state: Any = None,
        tool_call_id: str | None = None,
        config: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Async twin of ``invoke`` (same arguments); a sync function runs in a worker thread."""
        validated = self.parse_args(args)
        return await self.arun_validated(
            validated,
            state=state,
            tool_call_id=tool_call_id,
            config=config,
            idempotency_key=idempotency_key,
        )

    async def arun_validated(
        self,
        validated: BaseModel,
        *,
        state: Any = None,
        tool_call_id: str | None = None,
        config: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Run the tool on arguments already checked by ``parse_args`` (used by ``ToolNode``)."""
        kwargs = self._kwargs(validated, _pack(state, tool_call_id, config, idempotency_key))
        if self.coroutine is not None:
            return await self.coroutine(**kwargs)
        return await asyncio.to_thread(self.func, **kwargs)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, without validation or injection."""
        impl = self.func or self.coroutine
        return impl(*args, **kwargs)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, return_direct={self.return_direct})"


def _pack(state: Any, tool_call_id: Any, config: Any, key: Any) -> dict[str, Any]:
    return {
        "state": state,
        "tool_call_id": tool_call_id,
        "config": config if config is not None else {},
        "idempotency_key": key if key is not None else tool_call_id,
    }


def _injected_value(marker: Any, injections: dict[str, Any]) -> Any:
    """The value the engine passes for one injected parameter."""
    if marker is InjectedToolCallId or isinstance(marker, InjectedToolCallId):
        return injections["tool_call_id"]
    if marker is InjectedConfig or isinstance(marker, InjectedConfig):
        return injections["config"]
    if marker is InjectedIdempotencyKey or isinstance(marker, InjectedIdempotencyKey):
        return injections["idempotency_key"]
    state = injections["state"]
    field = marker.field if isinstance(marker, InjectedState) else None
    if field is None or state is None:
        return state
    if isinstance(state, dict):
        return state.get(field)
    return getattr(state, field, None)


def _make_tool(
    func: Callable[..., Any],
    name: str | None,
    description: str | None,
    return_direct: bool,
    args_schema: type[BaseModel] | None,
) -> Tool:
    summary, _ = _parse_docstring(func.__doc__)
    is_async = inspect.iscoroutinefunction(func)
    return Tool(
        name or func.__name__,
        description if description is not None else summary,
        func=None if is_async else func,
        coroutine=func if is_async else None,
        args_schema=args_schema,
        return_direct=return_direct,
    )


@overload
def tool(name_or_func: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    name_or_func: str | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    args_schema: type[BaseModel] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    name_or_func: str | Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    args_schema: type[BaseModel] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function (sync or async) into a ``Tool``, as LangChain's ``@tool``.

    Forms: ``@tool``, ``@tool("name")``, ``@tool(name=..., description=...,
    return_direct=True, args_schema=Model)``. The name defaults to the function's name,
    the description to the docstring's text before its first section (``Args:``...).

    Raises:
        TypeError: a parameter type cannot be expressed as a JSON schema.
    """
    if callable(name_or_func):
        return _make_tool(name_or_func, name, description, return_direct, args_schema)
    chosen = name_or_func or name

    def decorate(func: Callable[..., Any]) -> Tool:
        return _make_tool(func, chosen, description, return_direct, args_schema)

    return decorate
