"""Drive the demo on a pseudo-terminal, answering its approval prompt as a person would."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

APPROVAL_PROMPT = b"approve? [y]es / [n]o / [e]dit arguments"


def demo_on_a_terminal(cwd: Path, question: str, answers: list[bytes],
                       timeout_s: float = 120.0) -> bytes:
    """Run ``threadloom demo --scripted QUESTION`` in ``cwd`` with a terminal as its stdin
    and stdout; answer the n-th approval prompt with ``answers[n]``; return all it printed
    once it exits (or after ``timeout_s`` seconds)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the demo
        os.chdir(cwd)
        os.execv(sys.executable, [sys.executable, "-m", "threadloom.cli", "demo", "--scripted",
                                  question])
    pending = list(answers)
    out, deadline = b"", time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            out += data
            if pending and out.count(APPROVAL_PROMPT) == len(answers) - len(pending) + 1:
                os.write(fd, pending.pop(0))
    os.waitpid(pid, 0)
    return out
