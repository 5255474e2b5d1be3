"""``Tool`` and the ``@tool`` decorator (``format_tool_output`` is in ``tools.output``).

A tool wraps a sync or async function; its argument model and JSON schema come from
``threadloom.tools.schema``, its injected parameters from ``threadloom.tools.markers``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, overload

from pydantic import BaseModel, ValidationError

from threadloom.errors import ToolError
from threadloom.tools.markers import (
    ABSENT,
    InjectedLiveState,
    _injected_value,
    _pack,
    is_caller_arg,
    live_state_writes,
)
from threadloom.tools.output import format_tool_output
from threadloom.tools.plain import _MISSING, _plain_fields, _PlainPlan
from threadloom.tools.runtime import ToolRuntime
from threadloom.tools.schema import _build_args_model, _clean_schema, _parse_docstring
from threadloom.workers import to_worker


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
        self._live = [p for p, m in self._injected.items() if isinstance(m, InjectedLiveState)]
        params = inspect.signature(impl).parameters
        self._optional_injected = frozenset(  # a missing state field leaves their default
            p for p in self._injected if p in params
            and params[p].default is not inspect.Parameter.empty)
        # (the model it was made for, (parameter, exact type) per field) or None
        self._plain: _PlainPlan | None = (
            _plain_fields(self.args_model, self._field_names)
            if args_schema is None and not self._injected else None)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass with ``_run``/``_arun`` and no ``__init__`` is built from its
        declared fields, as a LangChain ``BaseTool`` subclass (``tools.subclass``)."""
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__ and ("_run" in cls.__dict__ or "_arun" in cls.__dict__):
            from threadloom.tools.subclass import init_from_fields

            cls.__init__ = init_from_fields  # type: ignore[method-assign,assignment]

    @property
    def takes_injections(self) -> bool:
        """Whether any parameter is filled by the engine (state, call id, config, key)."""
        return bool(self._injected)

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
        injected = self._injected
        clean = {k: v for k, v in args.items() if k not in injected} if injected else args
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

    def plain_kwargs(self, args: Any) -> dict[str, Any] | None:
        """``_call_kwargs(parse_args(args), ...)`` for the usual arguments, made without
        pydantic; None when that shortcut does not apply (then validate as usual).

        It applies to a tool whose argument model was built from its signature (no
        ``args_schema``), whose parameters are all required, none injected, each a plain
        ``int``, ``str``, ``bool`` or ``float`` without constraints, and to ``args``
        holding exactly those names, each value of exactly that type. pydantic's
        validation then returns every value unchanged (lax mode converts only other
        types, which take the general path), so the keyword arguments are equal.
        """
        plain = self._plain
        if (plain is None or type(args) is not dict or len(args) != len(plain[1])
                or plain[0] is not self.args_model or self._injected):
            return None
        kwargs: dict[str, Any] = {}
        for pname, kind in plain[1]:
            value = args.get(pname, _MISSING)
            if type(value) is not kind:
                return None
            kwargs[pname] = value
        return kwargs

    def _kwargs(self, validated: BaseModel, injections: dict[str, Any]) -> dict[str, Any]:
        kwargs = {p: getattr(validated, f) for p, f in self._field_names.items()}
        optional = self._optional_injected
        for pname, marker in self._injected.items():
            if is_caller_arg(marker):  # only a direct caller's args hold it
                given = injections.get("given") or {}
                if pname in given:
                    kwargs[pname] = given[pname]
                continue
            injections["lenient"] = pname in optional
            value = _injected_value(marker, injections)
            if value is not ABSENT:
                kwargs[pname] = value
        return kwargs

    def _call_kwargs(self, validated: BaseModel, state: Any, tool_call_id: Any, config: Any,
                     idempotency_key: Any, runtime: Any = None,
                     given: Any = None) -> dict[str, Any]:
        if not self._injected:
            return {p: getattr(validated, f) for p, f in self._field_names.items()}
        injections = _pack(state, tool_call_id, config, idempotency_key, runtime)
        injections["given"] = given
        return self._kwargs(validated, injections)

    @property
    def takes_runtime(self) -> bool:
        """Whether a parameter is typed ``ToolRuntime`` (``tools.runtime``)."""
        return any(m is ToolRuntime for m in self._injected.values())

    def invoke(
        self,
        args: dict[str, Any],
        *,
        state: Any = None,
        tool_call_id: str | None = None,
        config: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        runtime: Any = None,
    ) -> Any:
        """Validate ``args`` and run the tool; returns what the function returned.

        Args:
            args: the model's arguments (a dict); names of injected parameters are dropped.
            state: the graph state, for ``InjectedState`` parameters.
            tool_call_id: for ``InjectedToolCallId`` parameters.
            config: for ``InjectedConfig`` / ``config`` parameters (default ``{}``).
            idempotency_key: for ``InjectedIdempotencyKey`` (default: ``tool_call_id``).
            runtime: the ``ToolRuntime`` for a ``ToolRuntime`` parameter (default: one
                holding ``state``, ``tool_call_id`` and ``config``).

        An async-only tool is run with ``asyncio.run`` (not allowed inside a running loop:
        use ``ainvoke`` there).

        Raises:
            ToolError: the arguments are not an object or fail validation.
            RuntimeError: an async-only tool invoked from a running event loop.
            Exception: whatever the tool itself raises, unchanged.
        """
        validated = self.parse_args(args)
        injections = _pack(state, tool_call_id, config, idempotency_key, runtime)
        injections["given"] = args
        kwargs = self._kwargs(validated, injections)
        if self.func is not None:
            result = self.func(**kwargs)
            return self._writes(result, kwargs, state, tool_call_id) if self._live else result
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
        runtime: Any = None,
    ) -> Any:
        """Async twin of ``invoke`` (same arguments); a sync function runs in a worker thread."""
        validated = self.parse_args(args)
        return await self.arun_validated(
            validated,
            state=state,
            tool_call_id=tool_call_id,
            config=config,
            idempotency_key=idempotency_key,
            runtime=runtime,
            _given=args,
        )

    async def arun_validated(
        self,
        validated: BaseModel,
        *,
        state: Any = None,
        tool_call_id: str | None = None,
        config: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        inline: bool = False,
        runtime: Any = None,
        _given: Any = None,
    ) -> Any:
        """Run the tool on arguments already checked by ``parse_args`` (used by ``ToolNode``).

        A sync ``func`` runs in a worker thread (``threadloom.workers.to_worker``,
        with the contract of ``asyncio.to_thread``, as LangChain's tools run), so it cannot
        block the event loop; with ``inline=True`` it is called on
        the calling thread instead. Pass that only when blocking the loop costs nothing:
        ``ToolNode`` does for a lone call in a step the engine marks ``blocking_ok``
        (a sync ``invoke``/``stream`` run, see ``threadloom.engine.runtime.TaskContext``).
        """
        kwargs = self._call_kwargs(validated, state, tool_call_id, config, idempotency_key,
                                   runtime, _given)  # _given: ainvoke's args (caller args)
        if self.coroutine is not None:
            result = await self.coroutine(**kwargs)
        elif inline:
            result = self.func(**kwargs)  # type: ignore[misc]
        else:
            result = await to_worker(self.func, **kwargs)  # type: ignore[arg-type]
        return self._writes(result, kwargs, state, tool_call_id) if self._live else result

    def run_inline(self, validated: BaseModel, *, state: Any = None,
                   tool_call_id: str | None = None, config: dict[str, Any] | None = None,
                   idempotency_key: str | None = None, runtime: Any = None) -> Any:
        """``arun_validated(..., inline=True)`` of a sync tool, called without awaiting.

        Raises:
            TypeError: the tool is async-only (it has no sync ``func``).
        """
        if self.func is None:
            raise TypeError(f"tool {self.name!r} is async-only; use arun_validated")
        kwargs = self._call_kwargs(validated, state, tool_call_id, config, idempotency_key,
                                   runtime)
        result = self.func(**kwargs)
        return self._writes(result, kwargs, state, tool_call_id) if self._live else result

    def _writes(self, result: Any, kwargs: dict[str, Any], state: Any, call_id: Any) -> Any:
        return live_state_writes(result, [kwargs.get(p) for p in self._live], state,
                                 call_id, self.name, format_tool_output)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, without validation or injection."""
        impl = self.func or self.coroutine
        return impl(*args, **kwargs)  # type: ignore[misc]

    def as_graph_node(self) -> Callable[..., Any]:
        """The node function the engine runs for ``add_node(name, tool)`` (``tools.as_node``:
        the state's keys are the arguments and the tool's return value is the node's)."""
        from threadloom.tools.as_node import tool_as_node

        return tool_as_node(self)

    def warm_up(self) -> None:
        """Nothing to prepare (Haystack's ``Tool.warm_up``; the agent calls it)."""

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, return_direct={self.return_direct})"


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


__all__ = ["Tool", "format_tool_output", "tool"]
