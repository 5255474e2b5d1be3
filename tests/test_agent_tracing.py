"""OpenTelemetry spans of agent runs: names, attributes, and no secrets or content."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from threadloom import AIMessage, HumanMessage, ScriptedChatModel, create_agent, tool
from threadloom.agent import tracing
from threadloom.agent.tracing import (
    SPAN_LLM,
    SPAN_RUN,
    SPAN_STEP,
    agent_span,
    config_attributes,
    is_secret_name,
    safe_attributes,
    set_content_tracing,
    set_tracer_provider,
)

CANARY = "sk-CANARY-5f1e0c2d9b"
CONTENT = "CONTENT-CANARY-question"


@pytest.fixture(scope="module")
def exporter():
    # A provider for threadloom only: OTel's global provider can be set once per process,
    # and other tests (benchmarks) should not pay for recording spans.
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    set_tracer_provider(provider)
    yield memory
    set_tracer_provider(None)
    provider.shutdown()


@pytest.fixture
def spans(exporter):
    exporter.clear()
    set_content_tracing(None)
    yield exporter
    set_content_tracing(None)
    exporter.clear()


def _dump(finished) -> str:
    """Everything a span exporter would ship, as text."""
    parts = []
    for span in finished:
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts.append(str(span.status.description))
        for event in span.events:
            parts.append(event.name + json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(parts)


def test_secret_names_are_recognised_but_token_counts_are_not():
    for name in ("api_key", "OPENAI_API_KEY", "Authorization", "access_token", "db.password",
                 "client_secret", "x-api-key", "auth"):
        assert is_secret_name(name), name
    for name in ("thread_id", "token_usage.input_tokens", "total_tokens", "step_count",
                 "max_tokens", "exit_reason"):
        assert not is_secret_name(name), name


def test_safe_attributes_flatten_filter_and_drop_objects():
    attrs = safe_attributes({
        "step_count": 3, "token_usage": {"input_tokens": 5, "output_tokens": 2},
        "exit_conditions": ["text", "add"], "api_key": CANARY,
        "messages": [HumanMessage(CONTENT)], "model": object(), "nothing": None,
    }, "threadloom.agent.")
    assert attrs == {
        "threadloom.agent.step_count": 3,
        "threadloom.agent.token_usage.input_tokens": 5,
        "threadloom.agent.token_usage.output_tokens": 2,
        "threadloom.agent.exit_conditions": ["text", "add"],
    }


def test_content_is_kept_only_when_content_tracing_is_on(spans):
    assert safe_attributes({"prompt": CONTENT}) == {}
    set_content_tracing(True)
    assert safe_attributes({"prompt": CONTENT, "api_key": CANARY}) == {"prompt": CONTENT}


def test_config_attributes_never_copy_secret_keys():
    config = {"configurable": {"thread_id": "t-1", "api_key": CANARY, "user_token": CANARY,
                               "Authorization": f"Bearer {CANARY}", "tenant": "acme"},
              "tags": ["prod"]}
    assert config_attributes(config) == {
        "threadloom.config.thread_id": "t-1", "threadloom.config.tenant": "acme",
        "threadloom.config.tags": ["prod"],
    }


def test_agent_span_records_name_attributes_and_nesting(spans):
    with agent_span(SPAN_RUN, {"threadloom.agent.name": "bot", "password": CANARY},
                    config={"configurable": {"thread_id": "t-9", "secret": CANARY}}) as run:
        with agent_span(SPAN_STEP, {"threadloom.agent.step": 1}):
            pass
        run.set_attributes({"exit_reason": "text", "token": CANARY}, "threadloom.agent.")
    step, outer = spans.get_finished_spans()
    assert (outer.name, step.name) == (SPAN_RUN, SPAN_STEP)
    assert step.parent.span_id == outer.context.span_id
    assert dict(outer.attributes) == {
        "threadloom.config.thread_id": "t-9", "threadloom.agent.name": "bot",
        "threadloom.agent.exit_reason": "text",
    }
    assert CANARY not in _dump(spans.get_finished_spans())


def test_a_failing_span_records_the_error_type_not_its_message(spans):
    with pytest.raises(RuntimeError), agent_span(SPAN_LLM):
        raise RuntimeError(f"provider echoed {CANARY}")
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "RuntimeError"
    assert CANARY not in _dump([span])


def test_agent_span_is_a_no_op_without_a_tracer_provider(monkeypatch, spans):
    monkeypatch.setattr(tracing, "_provider", None)
    monkeypatch.setattr(tracing._otel_trace, "get_tracer_provider",
                        lambda: trace.ProxyTracerProvider())
    assert not tracing.tracing_active()
    with agent_span(SPAN_RUN, {"step_count": 1}) as span:
        span.set_attributes({"x": 1})
        assert not span.recording
    assert spans.get_finished_spans() == ()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_agent_run_emits_run_step_and_llm_spans_without_secrets(spans, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    call = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}])
    model = ScriptedChatModel([call, "The answer is 5."])
    agent = create_agent(model, [add], system_prompt="You add numbers.")
    out = agent.invoke({"messages": [HumanMessage(CONTENT)]},
                       config={"configurable": {"thread_id": "t-1", "api_key": CANARY}})
    assert out["step_count"] == 2

    finished = spans.get_finished_spans()
    names = [s.name for s in finished]
    assert names.count(SPAN_RUN) == 1
    assert names.count(SPAN_STEP) == 2
    assert names.count(SPAN_LLM) == 2
    run = next(s for s in finished if s.name == SPAN_RUN)
    keys = " ".join(run.attributes)
    assert "step_count" in keys and "exit" in keys and "input_tokens" in keys
    for llm in (s for s in finished if s.name == SPAN_LLM):
        parent = next(s for s in finished if s.context.span_id == llm.parent.span_id)
        assert parent.name == SPAN_STEP
    dumped = _dump(finished)
    assert CANARY not in dumped
    assert CONTENT not in dumped and "The answer is 5." not in dumped
