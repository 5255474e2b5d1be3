"""Chat models: the `ChatModel` contract, the OpenAI-compatible adapter, test doubles.

`init_chat_model("provider:model")` builds a model from one string, as LangChain's
function of the same name does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import BaseChatModel, ChatModel, ChunkAccumulator, guard_tool_calls, tool_to_openai
from .bound import BoundChatModel
from .cassette import CassetteMismatchError, RecordingChatModel, ReplayChatModel
from .scripted import ScriptedChatModel
from .structured_output import StructuredChatModel, StructuredOutputError

if TYPE_CHECKING:
    from .openai import OpenAIChatModel


def __getattr__(name: str) -> Any:
    # The OpenAI adapter (and the openai package, ~50k objects the garbage collector would
    # walk forever after) loads on first use, not with every model.
    if name == "OpenAIChatModel":
        from .openai import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(f"module 'threadloom.models' has no attribute {name!r}")

__all__ = [
    "BaseChatModel",
    "BoundChatModel",
    "StructuredChatModel",
    "StructuredOutputError",
    "CassetteMismatchError",
    "ChatModel",
    "ChunkAccumulator",
    "OpenAIChatModel",
    "PROVIDERS",
    "RecordingChatModel",
    "ReplayChatModel",
    "ScriptedChatModel",
    "guard_tool_calls",
    "init_chat_model",
    "tool_to_openai",
]

#: Providers ``init_chat_model`` knows, with what each builds.
PROVIDERS = {
    "openai": "OpenAIChatModel (OPENAI_API_KEY / OPENAI_BASE_URL honoured)",
    "ollama": "OpenAIChatModel at http://localhost:11434/v1 (api_key 'ollama')",
    "local": "threadloom.models.local.LocalChatModel (llama.cpp in-process, extra 'local')",
}
OLLAMA_BASE_URL = "http://localhost:11434/v1"


def init_chat_model(model: str, **kwargs: Any) -> Any:
    """Build a chat model from ``"provider:model"``.

    Args:
        model: ``"openai:gpt-4o-mini"``, ``"ollama:llama3"``, ``"local:smollm2"``, or a
            bare model name without ``:`` (OpenAI). The provider is the text before the
            first ``:``, so ``"ollama:qwen2.5:7b"`` keeps its tag.
        **kwargs: passed to the model's constructor (``base_url``, ``api_key``,
            ``temperature``...).

    Returns:
        An ``OpenAIChatModel`` (openai, ollama) or a ``LocalChatModel`` (local).

    Raises:
        ValueError: an unknown provider (the message lists the known ones), or an empty
            model name.
    """
    provider, sep, name = model.partition(":")
    if not sep:
        provider, name = "openai", model
    known = ", ".join(sorted(PROVIDERS))
    if provider not in PROVIDERS:
        raise ValueError(f"init_chat_model({model!r}): unknown provider {provider!r}; known "
                         f"providers: {known} (a model name containing ':' needs its "
                         f"provider first, e.g. 'ollama:llama3:8b')")
    if not name:
        raise ValueError(f"init_chat_model({model!r}): no model name after {provider!r}:")
    if provider == "local":
        from threadloom.models.local import LocalChatModel

        return LocalChatModel(name, **kwargs)
    from .openai import OpenAIChatModel

    if provider == "ollama":
        kwargs.setdefault("base_url", OLLAMA_BASE_URL)
        kwargs.setdefault("api_key", "ollama")
    return OpenAIChatModel(name, **kwargs)
