"""Fast unique ids for messages and tool calls.

``uuid.uuid4()`` reads the OS random source on every call (a system call) and builds a
``UUID`` object; an agent run makes several ids per step, so that shows in profiles. Here
ids come from one ``random.Random`` seeded with 256 bits of ``os.urandom`` (and seeded
again in a forked child, so parent and child never share a sequence). The ids are unique,
not secret: use ``secrets`` for tokens.

Shapes are those of ``uuid.uuid4()``: ``uuid4_str()`` looks like ``str(uuid.uuid4())``
(version 4, RFC 4122 variant) and ``uuid4_hex()`` like ``uuid.uuid4().hex``.
"""

from __future__ import annotations

import os
import random

_RNG = random.Random(os.urandom(32))
_BITS = _RNG.getrandbits  # one C call under the GIL: safe from any thread
# Clear the version nibble and the variant bits, then set version 4 / variant 10xx.
_KEEP = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_SET = (0x4000 << 64) | (0x8000 << 48)


def _reseed() -> None:
    _RNG.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)


# ``n.to_bytes(16, "big").hex()`` is ``f"{n:032x}"`` for 0 <= n < 2**128, in about a
# third of the time (no big-int formatting).


def uuid4_hex() -> str:
    """A random id shaped as ``uuid.uuid4().hex`` (32 lowercase hex digits)."""
    return (_BITS(128) & _KEEP | _SET).to_bytes(16, "big").hex()


def uuid4_str() -> str:
    """A random id shaped as ``str(uuid.uuid4())`` (``8-4-4-4-12`` lowercase hex)."""
    h = (_BITS(128) & _KEEP | _SET).to_bytes(16, "big").hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


__all__ = ["uuid4_hex", "uuid4_str"]
