"""Shared pytest fixtures for the chat-model tests (imported by the test modules).

``provider_server`` starts one loopback OpenAI-compatible server per test module (its queue
and request log are reset before every test); ``openai_model`` builds an
``OpenAIChatModel`` pointed at it, with client retries off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from providers_server import ProviderServer

from threadloom.models.openai import OpenAIChatModel

# An OpenAI tool dict the model tests share.
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}

@pytest.fixture(scope="module")
def _server_instance() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


@pytest.fixture
def provider_server(_server_instance: ProviderServer) -> ProviderServer:
    server = _server_instance
    server.requests.clear()
    server.default = None
    server._queue.clear()
    return server


@pytest.fixture(scope="module")
def _http_client() -> Iterator[Any]:
    client = openai.DefaultHttpxClient()  # one TLS context for the module: fast tests
    yield client
    client.close()


@pytest.fixture
def openai_model(provider_server: ProviderServer,
                 _http_client: Any) -> Callable[..., OpenAIChatModel]:
    def make(model: str = "test-model", **kwargs: Any) -> OpenAIChatModel:
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("http_client", _http_client)
        kwargs.setdefault("api_key", "sk-test-SECRET-1234")
        return OpenAIChatModel(model, base_url=provider_server.base_url, **kwargs)

    return make
