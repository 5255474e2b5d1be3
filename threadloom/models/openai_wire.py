"""OpenAI chat-completions wire format -> threadloom messages, and provider errors.

Three jobs, each tested against recorded payloads of OpenAI, Azure, Ollama, vLLM, LM
Studio, llama.cpp, DeepSeek, Gemini and Groq (``tests/fixtures/providers``):

- :func:`parse_completion`: a non-streamed ``chat.completion`` body -> ``AIMessage``;
- :class:`StreamConverter`: ``chat.completion.chunk`` objects -> ``AIMessageChunk`` s whose
  tool-call chunks carry a *normalised* index, so plain merging by index is right even
  when servers omit ``index`` (case H19) or reuse index 0 for every call (case H20);
- :func:`map_error`: ``openai`` exceptions -> ``threadloom.errors``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

import openai

from threadloom.errors import (
    ContentFilterError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    RateLimitError,
)
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    UsageMetadata,
    construct_unchecked,
    message_from_openai,
)
from threadloom.redact import mask_data, mask_urls

__all__ = ["MALFORMED", "StreamConverter", "malformed", "map_error", "map_usage",
           "parse_completion", "read_completion"]

_META_KEYS = ("system_fingerprint", "service_tier")


def map_usage(usage: Any) -> UsageMetadata | None:
    """Map an OpenAI ``usage`` (dict or object) to ``UsageMetadata``; None stays None.

    ``prompt_tokens_details.cached_tokens`` becomes ``input_token_details.cache_read`` and
    ``completion_tokens_details.reasoning_tokens`` ``output_token_details.reasoning`` (the
    names LangChain uses). A missing ``total_tokens`` is the sum of the two counts.
    """
    if usage is None:
        return None
    if not isinstance(usage, dict):
        usage = usage.model_dump() if hasattr(usage, "model_dump") else dict(vars(usage))
    inp = int(usage.get("prompt_tokens") or 0)
    out = int(usage.get("completion_tokens") or 0)
    result: dict[str, Any] = {
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": int(usage.get("total_tokens") or inp + out),
    }
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
    if cached:
        result["input_token_details"] = {"cache_read": int(cached)}
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    if reasoning is not None:
        result["output_token_details"] = {"reasoning": int(reasoning)}
    return UsageMetadata(**result)  # type: ignore[typeddict-item]


def _extra(obj: Any) -> dict[str, Any]:
    """Keys of an ``openai`` model beyond its declared fields (``getattr`` on a missing
    one costs an exception; this is a dict lookup on the streaming hot path)."""
    return getattr(obj, "__pydantic_extra__", None) or {}


def _reasoning_of(extra: dict[str, Any]) -> str | None:
    """DeepSeek/vLLM/llama.cpp ``reasoning_content``, or Ollama/LM Studio ``reasoning``."""
    return extra.get("reasoning_content") or extra.get("reasoning") or None


def _chunk(**values: Any) -> AIMessageChunk:
    """An ``AIMessageChunk`` from values already in shape, without re-validation."""
    return construct_unchecked(AIMessageChunk, **values)


def _metadata(data: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"finish_reason": choice.get("finish_reason"),
                            "model_name": data.get("model"), "id": data.get("id")}
    for key in _META_KEYS:
        if data.get(key) is not None:
            meta[key] = data[key]
    if data.get("prompt_filter_results") is not None:
        meta["prompt_filter_results"] = data["prompt_filter_results"]
    if choice.get("content_filter_results") is not None:
        meta["content_filter_results"] = choice["content_filter_results"]
    return meta


def parse_completion(data: dict[str, Any], message_id: str) -> AIMessage:
    """Turn a non-streamed ``chat.completion`` body into an ``AIMessage``.

    The message itself is read by ``message_from_openai``: ``content: null`` becomes
    ``""`` (H23); ``arguments`` may be a JSON string, an object or a double-encoded string
    (H22); an empty tool-call id (Gemini) is replaced by a fresh one; arguments that are not
    a JSON object go to ``invalid_tool_calls``. Usage, finish reason, model name, the
    provider's response id and Azure filter results are added here.

    Raises:
        ModelError: the body has no ``choices``, or ``choices``, its first item, the
            message or ``usage`` is not of the type the API defines.
    """
    choices = data.get("choices") or []
    if not choices:
        raise ModelError(f"the provider's reply has no choices: {json.dumps(data)[:300]}")
    _check_kind("choices", choices, list)
    _check_kind("choices[0]", choices[0], dict)
    _check_kind("choices[0].message", choices[0].get("message"), dict | None)
    _check_kind("usage", data.get("usage"), dict | None)
    choice = choices[0]
    # role "assistant" always reads back as an AIMessage
    message = cast(AIMessage, message_from_openai({**(choice.get("message") or {}),
                                                   "role": "assistant"}))
    return message.model_copy(update={
        "id": message_id,
        "usage_metadata": map_usage(data.get("usage")),
        "response_metadata": {**message.response_metadata, **_metadata(data, choice)},
    })


def _check_kind(what: str, value: Any, kinds: Any) -> None:
    if not isinstance(value, kinds):
        wanted = "a list" if kinds is list else "an object"
        raise ModelError(f"the provider's reply has a {what} that is a JSON "
                         f"{_json_kind(value)}, not {wanted}")


MALFORMED = (LookupError, TypeError, ValueError, AttributeError, RecursionError)
"""What reading a reply of the wrong shape raises in Python (``malformed`` maps it)."""


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean",
            type(None): "null"}.get(type(value), "number")


def _preview(text: str) -> str:
    return repr(" ".join(text[:160].split()))


def read_completion(text: str, where: str, message_id: str) -> AIMessage:
    """A non-streamed reply's body text -> ``AIMessage`` (``parse_completion``).

    Raises:
        ModelError: the body is not JSON (an HTML error page behind a 200), not a JSON
            object, nested too deeply, or not of the ``chat.completion`` shape; the
            message names ``where`` (provider model and URL) and what was wrong.
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise ModelError(f"{where}: the reply is JSON nested too deeply to read") from None
    except ValueError:
        raise ModelError(f"{where}: the reply is not JSON: {_preview(text)}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{where}: the reply is a JSON {_json_kind(data)}, not a "
                         f"chat.completion object: {_preview(text)}")
    try:
        return parse_completion(data, message_id)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from exc
    except MALFORMED as exc:
        raise malformed(where, "reply", exc) from exc


def malformed(where: str, what: str, exc: BaseException) -> ModelError:
    """The ``ModelError`` for a ``what`` (``"reply"``, ``"stream chunk"``) of the wrong
    shape, whose reading raised ``exc``."""
    detail = "nested too deeply" if isinstance(exc, RecursionError) else \
        f"{type(exc).__name__}: {' '.join(str(exc)[:200].split())}"
    return ModelError(f"{where}: the provider sent a malformed {what} ({detail})")


class StreamConverter:
    """Converts one streamed reply, chunk by chunk, into ``AIMessageChunk`` s.

    Every chunk gets ``message_id``. Usage is not put on the chunks as it arrives: the
    *last* usage seen (servers differ: a final ``choices: []`` chunk, usage on the finish
    chunk, or running totals on every chunk, H25) travels on the one chunk
    :meth:`finish` returns, together with the model name and the provider's response id.

    Tool-call index rules: a delta with an index continues the call at that index unless
    it brings a non-empty id different from that call's id (a new call, H20); a delta
    without an index continues the latest call unless it brings a new non-empty id (H19).
    A delta with no id, no name and empty arguments (vLLM's trailing one) adds nothing.
    """

    __slots__ = ("message_id", "_by_raw", "_ids", "_last", "_usage", "_meta", "_chunks")

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self._chunks = 0
        self._by_raw: dict[int, int] = {}  # server index -> our index
        self._ids: list[str | None] = []  # our index -> call id
        self._last: int | None = None
        self._usage: Any = None
        self._meta: dict[str, Any] = {}

    def _slot(self, raw_index: int | None, call_id: str | None) -> int:
        if raw_index is None:
            current = self._last
        else:
            current = self._by_raw.get(raw_index)
        if current is None or (call_id and self._ids[current] not in (None, call_id)):
            current = len(self._ids)
            self._ids.append(call_id)
            if raw_index is not None:
                self._by_raw[raw_index] = current
        elif call_id and self._ids[current] is None:
            self._ids[current] = call_id
        self._last = current
        return current

    def _tool_chunks(self, deltas: list[Any]) -> list[dict[str, Any]]:
        out = []
        for tc in deltas:
            fn = tc.function
            name = fn.name if fn is not None else None
            args = fn.arguments if fn is not None else None
            call_id = tc.id or None
            if call_id is None and not name and not args:
                continue
            if args is not None and not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)  # Ollama: arguments object
            out.append({"name": name or None, "args": args or None, "id": call_id,
                        "index": self._slot(tc.index, call_id)})
        return out

    def convert(self, chunk: Any) -> AIMessageChunk | None:
        """One ``ChatCompletionChunk`` in; a chunk out, or None when it carries nothing."""
        self._chunks += 1
        if chunk.usage is not None:
            self._usage = chunk.usage
        meta = self._meta
        if chunk.model:
            meta["model_name"] = chunk.model
        if chunk.id:
            meta["id"] = chunk.id
        if not chunk.choices:
            pfr = _extra(chunk).get("prompt_filter_results")
            if pfr is not None:
                meta["prompt_filter_results"] = pfr
            return None
        choice = chunk.choices[0]
        delta = getattr(choice, "delta", None)  # Azure annotation chunks have none
        content = reasoning = refusal = None
        tools: list[dict[str, Any]] = []
        if delta is not None:
            content = delta.content
            reasoning = _reasoning_of(_extra(delta))
            refusal = delta.refusal
            if delta.tool_calls:
                tools = self._tool_chunks(delta.tool_calls)
        extra: dict[str, Any] = {}
        if choice.finish_reason is not None:
            extra["finish_reason"] = choice.finish_reason
        cfr = _extra(choice).get("content_filter_results")
        if cfr is not None:
            extra["content_filter_results"] = cfr
        if not (content or reasoning or refusal or tools or extra):
            return None
        return _chunk(content=content or "", id=self.message_id,
                      reasoning_content=reasoning or None, refusal=refusal or None,
                      tool_call_chunks=tools, response_metadata=extra)

    def finish(self, where: str = "the model") -> AIMessageChunk:
        """The closing chunk: last usage seen, model name, provider response id.

        Raises:
            ModelError: the stream carried no chunk at all (say an HTML page sent as
                ``text/event-stream``); the message names ``where``.
        """
        if not self._chunks:
            raise ModelError(f"{where}: the provider's stream ended without a single "
                             "chunk (not a chat.completion.chunk stream)")
        try:
            usage = map_usage(self._usage)
        except MALFORMED as exc:  # "usage": "lots"
            raise malformed(where, "stream usage", exc) from exc
        return AIMessageChunk(content="", id=self.message_id, usage_metadata=usage,
                              response_metadata=dict(self._meta))


def map_error(exc: Exception, *, where: str,
              known: Sequence[str | None] = ()) -> ModelError:
    """Map an ``openai`` exception to a threadloom one (raise it ``from exc``).

    429 -> ``RateLimitError``; an Azure content-filter refusal (``code: content_filter``
    or ``innererror.code: ResponsibleAIPolicyViolation``) -> ``ContentFilterError``;
    Groq's ``tool_use_failed`` -> ``ModelHTTPError(retryable=True)`` (re-prompting helps);
    other statuses -> ``ModelHTTPError`` (retryable for 408/409/5xx); timeouts ->
    ``ModelTimeoutError``. Messages name ``where`` (model and URL), the status and the
    provider's own message. Retries already happened inside the client.

    The message never shows credentials: every URL in it has its password and secret
    query values masked, and so do the secrets of the ``known`` URLs (the model's base
    URLs) and every secret given to ``threadloom.redact.register_secrets`` (API keys,
    credential headers) wherever they appear, in the message and in ``body``.
    """
    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeoutError(mask_urls(f"{where}: the request timed out ({exc})", *known))
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        err = body if isinstance(body, dict) else {}
        code = err.get("code")
        code = str(code) if code is not None else None
        text = err.get("message") or (body if isinstance(body, str) else str(exc))
        message = f"{where}: HTTP {exc.status_code}" + (f" ({code})" if code else "")
        message = mask_urls(f"{message}: {text}", *known)
        inner = err.get("innererror")
        if not isinstance(inner, dict):
            inner = {}
        kwargs: dict[str, Any] = {"status_code": exc.status_code, "code": code,
                                  "body": mask_data(body)}
        if exc.status_code == 429:
            return RateLimitError(message, retryable=True, **kwargs)
        if code == "content_filter" or inner.get("code") == "ResponsibleAIPolicyViolation":
            return ContentFilterError(message, **kwargs)
        retryable = code == "tool_use_failed" or exc.status_code in (408, 409) \
            or exc.status_code >= 500
        return ModelHTTPError(message, retryable=retryable, **kwargs)
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(mask_urls(f"{where}: cannot connect ({exc})", *known))
    return ModelError(mask_urls(f"{where}: {type(exc).__name__}: {exc}", *known))
