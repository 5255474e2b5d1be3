"""Loading prompt templates from files under one root, refusing every escape.

SECURITY.md item 9: a template name is relative and ``/``-separated; ``..`` parts,
absolute paths (POSIX or Windows), NUL bytes and symlinks that resolve outside the root
raise ``SecurityError``. Symlinks that stay inside the root are followed.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

from threadloom.errors import SecurityError
from threadloom.prompts.sandbox import PromptTemplateError

if TYPE_CHECKING:
    from threadloom.prompts.templates import ChatPromptTemplate


class FileTemplateLoader:
    """Loads templates from files under one root directory, refusing every escape.

    Args:
        root: the directory templates live in (must exist).
        max_bytes: the largest template file accepted.
        encoding: the files' text encoding.

    Raises:
        NotADirectoryError: ``root`` is not a directory.
    """

    def __init__(self, root: str | os.PathLike[str], *, max_bytes: int = 1_000_000,
                 encoding: str = "utf-8") -> None:
        self._root = Path(root).resolve(strict=True)
        if not self._root.is_dir():
            raise NotADirectoryError(f"template root {str(root)!r} is not a directory")
        self._max_bytes = max_bytes
        self._encoding = encoding

    @property
    def root(self) -> Path:
        """The resolved root directory."""
        return self._root

    def resolve(self, name: str) -> Path:
        """Return the real path of template ``name`` (relative, ``/``-separated).

        Raises:
            SecurityError: ``name`` is absolute, has a ``..`` part or a NUL byte, or
                resolves (through symlinks) outside the root.
            FileNotFoundError: no such file under the root.
        """
        if not isinstance(name, str) or not name or "\x00" in name:
            raise SecurityError(f"template name refused: {name!r}")
        if PurePosixPath(name).is_absolute() or PureWindowsPath(name).anchor:
            raise SecurityError(f"template name refused: {name!r} is an absolute path")
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if ".." in parts:
            raise SecurityError(f"template name refused: {name!r} contains '..'")
        path = self._root.joinpath(*parts).resolve()
        if not path.is_relative_to(self._root):
            raise SecurityError(
                f"template name refused: {name!r} resolves outside {str(self._root)!r}")
        if not path.is_file():
            raise FileNotFoundError(f"no template {name!r} under {str(self._root)!r}")
        return path

    def load(self, name: str) -> str:
        """Return the text of template ``name``; errors as ``resolve``, plus
        ``PromptTemplateError`` when the file is larger than ``max_bytes``."""
        path = self.resolve(name)
        with path.open("rb") as file:
            # The size is checked before anything is read, and the read never takes more
            # than one byte past the limit (the file may grow after the check).
            size = os.fstat(file.fileno()).st_size
            data = b"" if size > self._max_bytes else file.read(self._max_bytes + 1)
        if size > self._max_bytes or len(data) > self._max_bytes:
            raise PromptTemplateError(
                f"template {name!r} is {max(size, len(data))} bytes; the limit is "
                f"{self._max_bytes}")
        return data.decode(self._encoding)

    def template(self, name: str, **options: Any) -> ChatPromptTemplate:
        """Load ``name`` and build a ``ChatPromptTemplate`` with ``options``."""
        from threadloom.prompts.templates import ChatPromptTemplate

        return ChatPromptTemplate(self.load(name), **options)


__all__ = ["FileTemplateLoader"]
