"""`OpenAIChatModel`: any OpenAI-compatible chat-completions server, via the `openai` package.

One adapter for OpenAI, Azure OpenAI (``base_url`` of the deployment), Ollama, vLLM, LM
Studio, llama.cpp's server, DeepSeek, Groq, Gemini's compatibility endpoint... The
official client does HTTP, retries (``max_retries``) and SSE; this module builds requests
(history in wire format, tools, system-message merging, JSON-schema tool prompting) and
hands responses to :mod:`threadloom.models.openai_wire`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import openai
from pydantic import SecretStr

from threadloom.errors import ModelError
from threadloom.messages import AIMessage, AIMessageChunk, BaseMessage, to_openai_messages
from threadloom.redact import (
    is_secret_header,
    mask_http_logs,
    mask_url,
    register_secrets,
    url_secrets,
)

from .base import BaseChatModel, guard_tool_calls, new_message_id
from .openai_wire import (
    MALFORMED,
    StreamConverter,
    malformed,
    map_error,
    parse_completion,
    read_completion,
)

__all__ = ["OpenAIChatModel"]

ToolCalling = Literal["native", "json_schema", "auto"]
_CHOICE_WORDS = ("auto", "none", "required")
_CREATE_PARAMS = frozenset(
    inspect.signature(openai.resources.chat.Completions.create).parameters) - {"self"}


def _tool_prompting() -> Any:
    """The JSON-schema tool-prompting module (``build_request``/``parse_reply``)."""
    try:
        from threadloom.models import tool_prompting
    except ImportError as exc:  # the seam: tool prompting ships separately
        raise NotImplementedError(
            "tool_calling='json_schema'/'auto' needs threadloom.models.tool_prompting, "
            "which is not available") from exc
    return tool_prompting


def _merge_systems(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All system messages joined (in order, blank line between) into one at index 0."""
    systems = [m for m in wire if m.get("role") == "system"]
    if not systems:
        return wire
    text = "\n\n".join(_text(m.get("content")) for m in systems)
    return [{"role": "system", "content": text}] + [m for m in wire if m.get("role") != "system"]


_NOT_IN_HOSTS = frozenset(' <>"{}|\\^`')


def _url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an HTTP API root, or None when it is well formed:
    no scheme, a scheme other than http/https, no host, a host with spaces or other
    characters no host name has, a port that is not a number."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        return f"it cannot be read as a URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        example = _with_http(url)
        if not scheme or (example and url.partition(":")[2][:1].isdigit()):  # "host:8000/v1"
            return f"it has no scheme (expected http:// or https://{example})"
        return f"its scheme {parts.scheme!r} is not http or https"
    if not parts.hostname:
        return "it names no host"
    if any(c in _NOT_IN_HOSTS or c.isspace() for c in parts.hostname):
        return f"its host {parts.hostname!r} is not a host name"
    try:
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        return f"its port {parts.netloc.rpartition(':')[2]!r} is not a number"
    return None


def _with_http(url: str) -> str:
    """``, e.g. 'http://<url>'`` when that names a host (its password masked), else ``""``."""
    if "//" in url or any(c.isspace() for c in url):
        return ""
    try:
        host = urlsplit(f"http://{url}").hostname
    except ValueError:
        return ""
    return f", e.g. {mask_url(f'http://{url}')!r}" if host else ""


def check_base_url(url: str, source: str = "base_url") -> None:
    """Refuse a malformed API root before any request is tried.

    Args:
        url: the base URL (``http(s)://host[:port]/...``).
        source: how messages name it (``base_url``, ``OPENAI_BASE_URL``).

    Raises:
        ValueError: naming ``source``, the URL (its password masked) and what is wrong
            (the scheme, the host or the port).
    """
    problem = _url_problem(url)
    if problem is not None:
        shown = mask_url(url)
        if "@" in shown and "://" not in shown:  # credentials mask_url did not see as such
            shown = "***@" + shown.rpartition("@")[2]
        raise ValueError(f"{source} {shown!r} is not a usable URL: {problem}")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


class OpenAIChatModel(BaseChatModel):
    """A chat model speaking the OpenAI chat-completions protocol.

    Args:
        model: the model name sent as ``model`` (e.g. ``"gpt-4o-mini"``, ``"llama3"``).
        base_url: the API root (``.../v1``); None uses ``OPENAI_BASE_URL`` or OpenAI's.
        api_key: None uses ``OPENAI_API_KEY``; servers without keys (Ollama, vLLM) get a
            placeholder when ``base_url`` is set. Kept as a ``SecretStr``, masked in repr.
        organization: OpenAI organization id.
        timeout: seconds per request (None: the client's default).
        max_retries: retries the client makes on 408/409/429/5xx/connection errors
            (None: the client's default, 2).
        empty_content: the ``content`` sent for an assistant message with tool calls and
            no text: ``""`` (default, accepted by LM Studio/llama.cpp) or None (``null``,
            strict OpenAI), case H23.
        merge_system_messages: join every system message into one at index 0 (for chat
            templates that reject a later system message, case H24). Off: sent as is.
        tool_calling: ``"native"`` sends ``tools``; ``"json_schema"`` prompts for tool
            calls through a JSON-schema ``response_format`` (models without native tool
            support); ``"auto"`` sends ``tools`` and also accepts a reply whose text is a
            JSON tool call.
        tool_prompting_options: keyword arguments for
            ``threadloom.models.tool_prompting.build_request`` in ``"json_schema"`` mode
            (e.g. ``{"max_tool_rounds": 1}`` for very small models).
        default_headers: extra HTTP headers on every request.
        include_reasoning: echo ``reasoning_content`` of earlier assistant turns (DeepSeek's
            thinking mode with tools expects it).
        http_client: an ``httpx`` client for the sync ``openai.OpenAI`` client (proxies,
            custom transports, connection sharing); None lets the client make its own.
        streaming: ``invoke`` always streams from the server and assembles the reply
            (servers that only stream; long replies). Inside a graph run that streams
            ``messages`` it streams regardless.
        **generation_kwargs: default request settings (``temperature``, ``max_tokens``,
            ``seed``...); keys the client does not know go in ``extra_body``.

    Raises:
        ValueError: ``tool_calling`` is not one of the three modes, or ``base_url`` (or,
            without it, ``OPENAI_BASE_URL``) is not a well-formed http(s) URL: the
            message names the scheme, host or port that is wrong.
    """

    supports_structured_output = True  # response_format json_schema (native strategy)

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 *, organization: str | None = None, timeout: float | None = None,
                 max_retries: int | None = None, empty_content: str | None = "",
                 merge_system_messages: bool = False, tool_calling: ToolCalling = "native",
                 tool_prompting_options: dict[str, Any] | None = None,
                 default_headers: dict[str, str] | None = None,
                 include_reasoning: bool = False, http_client: Any = None,
                 streaming: bool = False, **generation_kwargs: Any) -> None:
        if tool_calling not in ("native", "json_schema", "auto"):
            raise ValueError(f"tool_calling must be 'native', 'json_schema' or 'auto', "
                             f"got {tool_calling!r}")
        if base_url is not None:
            check_base_url(base_url)
        elif os.environ.get("OPENAI_BASE_URL"):
            check_base_url(os.environ["OPENAI_BASE_URL"], "OPENAI_BASE_URL")
        self.model = model
        self.base_url = base_url
        self._api_key = SecretStr(api_key) if api_key else None
        self.organization = organization
        self.timeout = timeout
        self.max_retries = max_retries
        self.empty_content = empty_content
        self.merge_system_messages = merge_system_messages
        self.tool_calling: ToolCalling = tool_calling
        self.tool_prompting_options = dict(tool_prompting_options or {})
        self.default_headers = dict(default_headers or {})
        self.include_reasoning = include_reasoning
        self.http_client = http_client
        self.streaming = streaming
        self.generation_kwargs = generation_kwargs
        self._client: openai.OpenAI | None = None
        self._aclients: dict[int, openai.AsyncOpenAI] = {}
        self._register_secrets()

    def _register_secrets(self) -> None:
        """Make the key, credential headers and URL secrets masked in every error and
        log line (``threadloom.redact``), and mask the HTTP client's loggers."""
        key = self._api_key.get_secret_value() if self._api_key is not None else (
            os.environ.get("OPENAI_API_KEY"))
        urls = [u for u in (self.base_url, os.environ.get("OPENAI_BASE_URL")) if u]
        register_secrets(key, *(v for k, v in self.default_headers.items()
                                if is_secret_header(k, v)),
                         *(s for u in urls for s in url_secrets(u)))
        mask_http_logs()

    def __repr__(self) -> str:
        key = "None" if self._api_key is None else "'**********'"
        url = None if self.base_url is None else mask_url(self.base_url)
        return (f"OpenAIChatModel(model={self.model!r}, base_url={url!r}, "
                f"api_key={key}, tool_calling={self.tool_calling!r})")

    # -- clients --------------------------------------------------------------------------
    def _client_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"base_url": self.base_url, "organization": self.organization,
                              "default_headers": self.default_headers or None}
        url = self.base_url or os.environ.get("OPENAI_BASE_URL")
        parts = urlsplit(url) if url else None
        if parts is not None and parts.query:
            # The client appends the endpoint path to base_url: a query there would end
            # up before the path. It is sent as the client's default query instead.
            kw["base_url"] = urlunsplit(parts._replace(query="", fragment=""))
            kw["default_query"] = dict(parse_qsl(parts.query, keep_blank_values=True))
        if self._api_key is not None:
            kw["api_key"] = self._api_key.get_secret_value()
        elif not os.environ.get("OPENAI_API_KEY") and (
                self.base_url or os.environ.get("OPENAI_BASE_URL")):
            kw["api_key"] = "not-needed"  # local servers ignore the key
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        if self.max_retries is not None:
            kw["max_retries"] = self.max_retries
        return kw

    def _urls(self) -> list[str]:
        """The base URLs this model may use: its own, its clients', ``OPENAI_BASE_URL``."""
        clients = [self._client, *self._aclients.values()]
        found = [self.base_url, *(str(c.base_url) for c in clients if c is not None),
                 os.environ.get("OPENAI_BASE_URL")]
        return [u for u in found if u]

    @property
    def where(self) -> str:
        """``model 'x' at <url>``, used in error messages; the URL's password and secret
        query values are masked (``threadloom.redact.mask_url``)."""
        urls = self._urls()
        return f"model {self.model!r} at {mask_url(urls[0]) if urls else 'the OpenAI API'}"

    def _error(self, exc: Exception) -> ModelError:
        """``exc`` mapped by ``map_error``: the message names ``where``, and the secrets
        of the base URLs are masked wherever they appear in it."""
        return map_error(exc, where=self.where, known=self._urls())

    @property
    def client(self) -> openai.OpenAI:
        """The sync ``openai.OpenAI`` client, created on first use."""
        if self._client is None:
            kwargs = self._client_kwargs()
            if self.http_client is not None:
                kwargs["http_client"] = self.http_client
            try:
                self._client = openai.OpenAI(**kwargs)
            except openai.OpenAIError as exc:
                raise self._error(exc) from exc
        return self._client

    @property
    def async_client(self) -> openai.AsyncOpenAI:
        """The ``openai.AsyncOpenAI`` client of the running event loop, created on first use."""
        loop = id(asyncio.get_running_loop())
        if loop not in self._aclients:
            try:
                self._aclients = {loop: openai.AsyncOpenAI(**self._client_kwargs())}
            except openai.OpenAIError as exc:
                raise self._error(exc) from exc
        return self._aclients[loop]

    def close(self) -> None:
        """Close the sync client's connections (async clients close with their loop)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- requests -------------------------------------------------------------------------
    def request_params(self, msgs: list[BaseMessage], tools: list[dict] | None,
                       opts: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        """The keyword arguments for ``client.chat.completions.create``."""
        wire = to_openai_messages(msgs, empty_content=self.empty_content,
                                  include_reasoning=self.include_reasoning)
        if self.merge_system_messages:
            wire = _merge_systems(wire)
        params: dict[str, Any] = {**self.generation_kwargs, **opts}
        choice = params.get("tool_choice")
        if isinstance(choice, str) and choice not in _CHOICE_WORDS:
            params["tool_choice"] = {"type": "function", "function": {"name": choice}}
        if tools and self.tool_calling == "json_schema":
            params.pop("tool_choice", None)
            params.update(
                _tool_prompting().build_request(wire, tools, **self.tool_prompting_options))
        else:
            params["messages"] = wire
            if tools:
                params["tools"] = tools
        if stream:
            params["stream"] = True
            params.setdefault("stream_options", {"include_usage": True})
        params["model"] = self.model
        extra = {k: params.pop(k) for k in list(params) if k not in _CREATE_PARAMS}
        if extra:
            params["extra_body"] = {**extra, **(params.get("extra_body") or {})}
        return params

    def _emit_view(self, tools: list[dict] | None) -> Any:
        """In ``json_schema`` mode, stream the final answer's text, not the raw JSON."""
        if tools and self.tool_calling == "json_schema":
            from threadloom.models.answer_view import FinalAnswerView

            return FinalAnswerView()
        return None

    def _finish(self, message: AIMessage, tools: list[dict] | None) -> AIMessage:
        """Apply JSON-schema tool prompting's reply parsing, then the H14 guard."""
        if tools and not message.tool_calls and (
                self.tool_calling == "json_schema"
                or (self.tool_calling == "auto" and message.text.lstrip().startswith("{"))):
            wire = _tool_prompting().parse_reply(message.text, tools)
            parsed = parse_completion({"choices": [{"message": wire}]}, message.id or "")
            message = message.model_copy(update={"content": parsed.content,
                                                 "tool_calls": parsed.tool_calls})
        return guard_tool_calls(message, max_tool_calls=self.max_tool_calls, where=self.where)

    # -- hooks ----------------------------------------------------------------------------
    def _generate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                  opts: dict[str, Any]) -> AIMessage:
        params = self.request_params(msgs, tools, opts, stream=False)
        try:
            raw = self.client.chat.completions.with_raw_response.create(**params)
            text = raw.text
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        return read_completion(text, self.where, new_message_id())

    async def _agenerate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                         opts: dict[str, Any]) -> AIMessage:
        params = self.request_params(msgs, tools, opts, stream=False)
        try:
            raw = await self.async_client.chat.completions.with_raw_response.create(**params)
            text = raw.text
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        return read_completion(text, self.where, new_message_id())

    def _stream(self, msgs: list[BaseMessage], tools: list[dict] | None,
                opts: dict[str, Any]) -> Iterator[AIMessageChunk]:
        params = self.request_params(msgs, tools, opts, stream=True)
        conv = StreamConverter(new_message_id())
        try:
            with self.client.chat.completions.create(**params) as response:
                for raw in response:
                    chunk = conv.convert(raw)
                    if chunk is not None:
                        yield chunk
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        except MALFORMED as exc:  # SSE garbage, a chunk that is a list or has odd fields
            raise malformed(self.where, "stream chunk", exc) from exc
        yield conv.finish(self.where)

    async def _astream(self, msgs: list[BaseMessage], tools: list[dict] | None,
                       opts: dict[str, Any]) -> AsyncIterator[AIMessageChunk]:
        params = self.request_params(msgs, tools, opts, stream=True)
        conv = StreamConverter(new_message_id())
        try:
            async with await self.async_client.chat.completions.create(**params) as response:
                async for raw in response:
                    chunk = conv.convert(raw)
                    if chunk is not None:
                        yield chunk
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        except MALFORMED as exc:  # SSE garbage, a chunk that is a list or has odd fields
            raise malformed(self.where, "stream chunk", exc) from exc
        yield conv.finish(self.where)
