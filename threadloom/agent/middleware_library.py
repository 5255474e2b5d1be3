"""Ready-made agent middleware: retrying and falling back on model errors, caching model
replies, retrying failing tools. Modeled on LangChain's ``ModelRetryMiddleware``,
``ModelFallbackMiddleware`` and ``ToolRetryMiddleware``.

All are async wrappers (``awrap_model_call`` / ``awrap_tool_call``), so they add no worker
thread to a run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from threadloom.agent.middleware import AgentMiddleware
from threadloom.errors import ModelHTTPError, ModelTimeoutError
from threadloom.messages import AIMessage, ToolMessage

RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
Handler = Callable[[Any], Awaitable[Any]]


def transient_model_error(exc: BaseException) -> bool:
    """The default ``on`` of ``ModelRetryMiddleware``: errors a new attempt may cure.

    True for a ``ModelHTTPError`` marked ``retryable`` (429, 5xx...), a
    ``ModelTimeoutError``, and ``ConnectionError``/``TimeoutError``.
    """
    if isinstance(exc, ModelHTTPError):
        return exc.retryable
    return isinstance(exc, ModelTimeoutError | ConnectionError | TimeoutError)


def _matches(rule: RetryOn, exc: BaseException) -> bool:
    if isinstance(rule, type | tuple):
        return isinstance(exc, rule)
    return bool(rule(exc))


class _Backoff:
    """Delays between attempts: ``initial_delay * backoff_factor ** n``, capped, jittered."""

    def __init__(self, max_retries: int, initial_delay: float, backoff_factor: float,
                 max_delay: float, jitter: bool) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if initial_delay < 0 or max_delay < 0 or backoff_factor < 1:
            raise ValueError("delays must be >= 0 and backoff_factor >= 1")
        self.max_retries = max_retries
        self.initial_delay, self.backoff_factor = initial_delay, backoff_factor
        self.max_delay, self.jitter = max_delay, jitter

    async def sleep(self, retry: int) -> None:
        delay = min(self.max_delay, self.initial_delay * self.backoff_factor ** retry)
        if self.jitter:
            delay *= 0.5 + random.random()  # noqa: S311 (not cryptographic)
        if delay > 0:
            await asyncio.sleep(delay)


class ModelRetryMiddleware(AgentMiddleware):
    """Retry a failing model call, with exponential backoff.

    Args:
        max_retries: retries after the first attempt (0: none).
        on: which errors to retry: an exception class, a tuple of them, or a predicate
            ``exc -> bool``. Default ``transient_model_error``.
        initial_delay: seconds before the first retry.
        backoff_factor: multiplier of the delay after each retry (>= 1).
        max_delay: cap on one delay, in seconds.
        jitter: scale each delay by a random factor in [0.5, 1.5).

    Raises:
        ValueError: negative ``max_retries`` or delays.
        The last error (with a note counting the attempts) once retries are spent; errors
        ``on`` does not match are raised at once.
    """

    def __init__(self, max_retries: int = 2, *, on: RetryOn = transient_model_error,
                 initial_delay: float = 1.0, backoff_factor: float = 2.0,
                 max_delay: float = 60.0, jitter: bool = True) -> None:
        self.backoff = _Backoff(max_retries, initial_delay, backoff_factor, max_delay, jitter)
        self.on = on

    async def awrap_model_call(self, request: Any, handler: Handler) -> Any:
        """Call ``handler`` up to ``max_retries + 1`` times."""
        retries = self.backoff.max_retries
        for attempt in range(retries + 1):
            try:
                return await handler(request)
            except Exception as exc:
                if attempt == retries or not _matches(self.on, exc):
                    if attempt:
                        exc.add_note(f"{self.name}: gave up after {attempt + 1} attempts")
                    raise
            await self.backoff.sleep(attempt)
        raise RuntimeError("unreachable")  # pragma: no cover


class ModelFallbackMiddleware(AgentMiddleware):
    """When the model call fails, try other models in order, as LangChain's middleware.

    Args:
        *models: fallback chat models, tried in the order given after the agent's model.
        on: which errors trigger a fallback (class, tuple or predicate; default any
            ``Exception``).

    Raises:
        ValueError: no fallback model given.
        The last model's error once every model failed (notes name the earlier failures).
    """

    def __init__(self, *models: Any, on: RetryOn = Exception) -> None:
        if not models:
            raise ValueError("ModelFallbackMiddleware needs at least one fallback model")
        self.models = models
        self.on = on

    async def awrap_model_call(self, request: Any, handler: Handler) -> Any:
        """Call ``handler`` with the agent's model, then with each fallback model."""
        failures: list[str] = []
        candidates = [None, *self.models]
        for index, model in enumerate(candidates):
            attempt = request if model is None else dataclasses.replace(request, model=model)
            try:
                return await handler(attempt)
            except Exception as exc:
                if index == len(candidates) - 1 or not _matches(self.on, exc):
                    for line in failures:
                        exc.add_note(line)
                    raise
                failures.append(f"{self.name}: {attempt.model!r} failed first: "
                                f"{type(exc).__name__}: {exc}")
        raise RuntimeError("unreachable")  # pragma: no cover


def _cache_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def _tool_key(t: Any) -> Any:
    from threadloom.models.tool_calls import tool_to_openai

    try:
        return tool_to_openai(t)
    except TypeError:
        return repr(t)


class ModelCallCacheMiddleware(AgentMiddleware):
    """Answer a model call from memory when the same request was answered before.

    The key is a SHA-256 of the model's class and name, the system prompt, the messages
    (ids left out), the tools' schemas, ``tool_choice``, ``response_format`` and
    ``generation_kwargs``.
    A hit returns a copy of the stored reply with a fresh id, no ``usage_metadata`` (it
    cost no tokens) and ``response_metadata["cache_hit"] = True``. Failed calls are not
    cached. The cache is per instance, in process memory, least recently used first out.
    Sampling settings are part of the key but not honoured: a hit replays one sample.

    Args:
        maxsize: the most replies kept (>= 1).

    Attributes:
        hits, misses: counters.
    """

    def __init__(self, maxsize: int = 1024) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self.hits = self.misses = 0
        self._cache: OrderedDict[str, AIMessage] = OrderedDict()

    def key(self, request: Any) -> str:
        """The cache key of a ``ModelRequest``."""
        model = request.model
        payload = {
            "model": [type(model).__module__, type(model).__qualname__,
                      getattr(model, "model", None) or getattr(model, "name", None)],
            "system_prompt": getattr(request, "system_prompt", None),
            "messages": [m.model_dump(mode="json", exclude={"id"}) for m in request.messages],
            "tools": [_tool_key(t) for t in request.tools or ()],
            "tool_choice": request.tool_choice,
            "response_format": request.response_format,
            "generation_kwargs": request.generation_kwargs,
        }
        text = json.dumps(payload, sort_keys=True, default=_cache_default, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    async def awrap_model_call(self, request: Any, handler: Handler) -> Any:
        """Return the cached reply for ``request``, or call ``handler`` and store it."""
        from threadloom.models.tool_calls import new_message_id

        key = self.key(request)
        stored = self._cache.get(key)
        if stored is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            meta = {**stored.response_metadata, "cache_hit": True}
            return stored.model_copy(update={"id": new_message_id(), "usage_metadata": None,
                                             "response_metadata": meta})
        self.misses += 1
        reply = await handler(request)
        if isinstance(reply, AIMessage):
            self._cache[key] = reply
            while len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        return reply

    def clear(self) -> None:
        """Forget every stored reply."""
        self._cache.clear()


class ToolRetryMiddleware(AgentMiddleware):
    """Retry failing tool calls, as LangChain's ``ToolRetryMiddleware``.

    A call fails when the handler raises an error ``on`` matches, or (with
    ``retry_error_results``) returns a ``ToolMessage`` with ``status="error"`` (the
    agent turns a tool's exception into such a message). Once retries are spent the last
    result is returned (an error message the model can read); a still-raised exception
    becomes an error ``ToolMessage`` too, unless ``on_failure="raise"``.

    Args:
        max_retries: retries after the first attempt.
        tools: names of the tools to retry (None: every tool).
        on: which raised errors to retry (class, tuple or predicate; default ``Exception``).
        retry_error_results: also retry calls answered with an error ``ToolMessage``.
        on_failure: ``"return_message"`` or ``"raise"``.
        initial_delay, backoff_factor, max_delay, jitter: as ``ModelRetryMiddleware``.

    Raises:
        ValueError: bad counts or delays, or an unknown ``on_failure``.
    """

    def __init__(self, max_retries: int = 2, *, tools: Iterable[str] | None = None,
                 on: RetryOn = Exception, retry_error_results: bool = True,
                 on_failure: str = "return_message", initial_delay: float = 1.0,
                 backoff_factor: float = 2.0, max_delay: float = 60.0,
                 jitter: bool = True) -> None:
        if on_failure not in ("return_message", "raise"):
            raise ValueError(f"on_failure must be 'return_message' or 'raise', "
                             f"got {on_failure!r}")
        self.backoff = _Backoff(max_retries, initial_delay, backoff_factor, max_delay, jitter)
        self.tools = None if tools is None else frozenset(tools)
        self.on, self.retry_error_results, self.on_failure = on, retry_error_results, on_failure

    async def awrap_tool_call(self, request: Any, handler: Handler) -> Any:
        """Call ``handler`` up to ``max_retries + 1`` times while the call fails."""
        call = request.tool_call
        if self.tools is not None and call.get("name") not in self.tools:
            return await handler(request)
        retries = self.backoff.max_retries
        for attempt in range(retries + 1):
            try:
                result = await handler(request)
            except Exception as exc:
                if not _matches(self.on, exc) or (attempt == retries
                                                  and self.on_failure == "raise"):
                    raise
                if attempt == retries:
                    return ToolMessage(
                        content=f"Error: tool {call.get('name')!r} failed after "
                                f"{attempt + 1} attempts: {type(exc).__name__}: {exc}",
                        tool_call_id=call.get("id") or "", name=call.get("name"),
                        status="error")
            else:
                failed = (self.retry_error_results and isinstance(result, ToolMessage)
                          and result.status == "error")
                if not failed or attempt == retries:
                    return result
            await self.backoff.sleep(attempt)
        raise RuntimeError("unreachable")  # pragma: no cover


__all__ = [
    "ModelCallCacheMiddleware", "ModelFallbackMiddleware", "ModelRetryMiddleware",
    "ToolRetryMiddleware", "transient_model_error",
]
