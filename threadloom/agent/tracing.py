"""OpenTelemetry spans for agent runs, safe by default.

``agent_span`` opens a span through ``opentelemetry-api`` (extra ``otel``) when it is
installed and an application has set a tracer provider (OTel's global one, or one given
to ``set_tracer_provider``); otherwise it costs one check and
records nothing. The core uses the span names ``threadloom.agent.run``,
``threadloom.agent.step`` and ``threadloom.agent.step.llm``.

What never reaches a span (SECURITY.md, secrets item 14):

- attributes or configurable keys whose name matches key/token/secret/password/auth
  (token *counts* such as ``input_tokens`` are not secrets and are kept);
- message content, prompts, tool arguments and results, unless content tracing is turned
  on (``set_content_tracing(True)`` or ``THREADLOOM_TRACE_CONTENT=1``), as the OTel GenAI
  conventions keep content capture opt-in;
- exception messages (they may quote content): a failing span records the exception type.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

try:  # the ``otel`` extra
    from opentelemetry import trace as _otel_trace
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # pragma: no cover - exercised only without the extra
    _otel_trace = None  # type: ignore[assignment]  # optional extra missing: None marks it

SPAN_RUN = "threadloom.agent.run"
SPAN_STEP = "threadloom.agent.step"
SPAN_LLM = "threadloom.agent.step.llm"
TRACER_NAME = "threadloom"

_SECRET = re.compile(r"key|token|secret|passw|auth|credential|cookie|session", re.IGNORECASE)
_COUNTS = frozenset({
    "input_tokens", "output_tokens", "total_tokens", "context_tokens", "cached_tokens",
    "reasoning_tokens", "token_usage", "max_tokens",
})
_CONTENT = frozenset({
    "messages", "message", "content", "prompt", "prompts", "system_prompt", "user_prompt",
    "completion", "input", "inputs", "output", "outputs", "args", "arguments", "result",
    "text", "structured_response", "last_message", "tool_args", "tool_result",
})
_PRIMITIVE = (str, bool, int, float)
_content_tracing: bool | None = None


def set_content_tracing(enabled: bool | None) -> None:
    """Turn content tracing on or off for this process (None: follow the environment).

    Even with content on, secret-named keys are never recorded.
    """
    global _content_tracing
    _content_tracing = enabled


def content_tracing_enabled() -> bool:
    """Whether message content may go into span attributes (off by default)."""
    if _content_tracing is not None:
        return _content_tracing
    return os.environ.get("THREADLOOM_TRACE_CONTENT", "").lower() in ("1", "true", "yes")


def is_secret_name(name: str) -> bool:
    """Whether an attribute or config key name looks like it holds a secret.

    Each dotted segment is checked: ``openai.api_key`` and ``Authorization`` are secret,
    ``token_usage.input_tokens`` is not.
    """
    return any(seg not in _COUNTS and _SECRET.search(seg) for seg in name.split("."))


def _is_content_name(name: str) -> bool:
    return any(seg in _CONTENT for seg in name.split("."))


def _clean_value(value: Any) -> Any:
    if isinstance(value, _PRIMITIVE):
        return value
    if isinstance(value, list | tuple) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and next(iter(kinds)) in _PRIMITIVE:
            return list(value)
    return None


def safe_attributes(attributes: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """Flatten and filter attributes for a span.

    Nested dicts become dotted keys (``token_usage.input_tokens``). Kept: strings, bools,
    numbers and homogeneous lists of them; dropped: None, other objects (messages,
    models...), secret-named keys, and content-named keys unless content tracing is on.

    Args:
        attributes: ``{name: value}``.
        prefix: prepended to every key (``"threadloom.agent."``).

    Returns:
        A new dict of OTel-compatible attributes.
    """
    result: dict[str, Any] = {}
    content = content_tracing_enabled()
    for key, value in (attributes or {}).items():
        name = f"{prefix}{key}"
        if is_secret_name(str(key)) or (not content and _is_content_name(str(key))):
            continue
        if isinstance(value, Mapping):
            result.update(safe_attributes(value, f"{name}."))
            continue
        clean = _clean_value(value)
        if clean is not None:
            result[name] = clean
    return result


def config_attributes(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Span attributes from a run config: ``configurable`` values, tags and run name.

    Keys named like secrets are never copied (their values are not even read), and only
    primitive values are kept, under ``threadloom.config.<key>``.
    """
    if not config:
        return {}
    picked: dict[str, Any] = {}
    configurable = config.get("configurable") or {}
    if isinstance(configurable, Mapping):
        picked.update({k: v for k, v in configurable.items()
                       if isinstance(k, str) and not is_secret_name(k)})
    for key in ("tags", "run_name", "recursion_limit"):
        if config.get(key) is not None:
            picked[key] = config[key]
    return safe_attributes(picked, "threadloom.config.")


class AgentSpan:
    """What ``agent_span`` yields: a span that filters what is written to it.

    Attributes:
        span: the OTel span, or None when tracing is off.
    """

    __slots__ = ("span",)

    def __init__(self, span: Any = None) -> None:
        self.span = span

    @property
    def recording(self) -> bool:
        """Whether anything written here is kept."""
        return self.span is not None and self.span.is_recording()

    def set_attributes(self, attributes: Mapping[str, Any], prefix: str = "") -> None:
        """Add attributes, filtered by ``safe_attributes``."""
        if self.recording:
            self.span.set_attributes(safe_attributes(attributes, prefix))

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        """Add a named event, its attributes filtered by ``safe_attributes``."""
        if self.recording:
            self.span.add_event(name, safe_attributes(attributes))


_NOOP = AgentSpan()


_provider: Any = None


def set_tracer_provider(provider: Any) -> None:
    """Send threadloom's spans to ``provider`` instead of OTel's global one (None: global).

    Lets an application (or a test) trace agents without installing a process-wide
    provider.
    """
    global _provider
    _provider = provider


def _current_provider() -> Any:
    if _provider is not None:
        return _provider
    return None if _otel_trace is None else _otel_trace.get_tracer_provider()


def tracing_active() -> bool:
    """Whether spans are recorded: OTel is installed and a tracer provider was set."""
    if _otel_trace is None:
        return False
    return not isinstance(_current_provider(), _otel_trace.ProxyTracerProvider)


@contextmanager
def agent_span(
    name: str, attributes: Mapping[str, Any] | None = None, *,
    config: Mapping[str, Any] | None = None,
) -> Iterator[AgentSpan]:
    """Open a span around part of an agent run; a no-op without OpenTelemetry.

    The span becomes the current one, so spans opened inside (steps, model calls, tool
    spans of instrumented clients) nest under it. An exception leaving the block marks the
    span as failed with the exception's type only, then propagates.

    Args:
        name: the span name (``SPAN_RUN``, ``SPAN_STEP``, ``SPAN_LLM``...).
        attributes: filtered by ``safe_attributes``, under their own names (the caller
            picks ``threadloom.agent.*`` names).
        config: the run config; safe ``configurable`` entries are added (see
            ``config_attributes``).

    Yields:
        An ``AgentSpan`` to add attributes (token usage, exit reason) before it ends.
    """
    if not tracing_active():
        yield _NOOP
        return
    tracer = _current_provider().get_tracer(TRACER_NAME)
    attrs = {**config_attributes(config), **safe_attributes(attributes)}
    with tracer.start_as_current_span(name, attributes=attrs, record_exception=False,
                                      set_status_on_exception=False) as span:
        try:
            yield AgentSpan(span)
        except Exception as exc:
            kind = type(exc).__name__
            detail = f"{kind}: {exc}" if content_tracing_enabled() else kind
            span.set_status(Status(StatusCode.ERROR, detail))
            span.set_attribute("error.type", kind)
            raise
        except BaseException as exc:  # interrupt() pauses the run: not a failure
            span.set_attribute("threadloom.interrupted", _is_interrupt(exc))
            raise


def _is_interrupt(exc: BaseException) -> bool:
    from threadloom.engine.runtime import GraphInterrupt

    return isinstance(exc, GraphInterrupt)


__all__ = [
    "SPAN_LLM", "SPAN_RUN", "SPAN_STEP", "AgentSpan", "agent_span", "config_attributes",
    "content_tracing_enabled", "is_secret_name", "safe_attributes", "set_content_tracing",
    "set_tracer_provider", "tracing_active",
]
