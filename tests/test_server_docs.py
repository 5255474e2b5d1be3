"""docs/server.md's walkthrough, run as written against the real server: the curl
conversation (with bash and curl) and the ``langgraph_sdk`` one (its ``await`` lines
in a coroutine), on an ``agent`` that answers and then asks for approval, so the
interrupt, the resume, the replay after ``Last-Event-ID`` and the cancel all happen."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from server_harness import HERE, running

pytestmark = pytest.mark.xdist_group("server")

DOC = (Path(__file__).resolve().parents[1] / "docs" / "server.md").read_text()
AGENT = f"{HERE / 'server_graphs.py'}:approval_agent"


def _block(title: str, lang: str) -> str:
    section = DOC.split(f"## {title}", 1)[1]
    return re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("docs"), {"agent": AGENT}) as base:
        yield base


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_curl_conversation(url):
    script = _block("A conversation with curl", "bash")
    lines = [ln for ln in script.splitlines() if not ln.startswith("threadloom serve")]
    script = "\n".join(lines).replace("localhost:2024", url.removeprefix("http://"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                          text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("event: metadata") == 1 and "event: messages\n" in out
    assert '"__interrupt__"' in out
    assert '"answer":"yes"' in out.replace(" ", "")  # the resumed run's answer
    # the stream's ids 1..4, then the replay after 3: event 4 alone, once
    assert [int(i) for i in re.findall(r"^id: (\d+)$", out, re.M)] == [1, 2, 3, 4, 4]
    assert '"server":"threadloom"' in out.replace(" ", "")


def test_the_langgraph_sdk_conversation(url):
    code = _block("The same with `langgraph_sdk`", "python")
    code = code.replace("http://127.0.0.1:2024", url)
    head, _, rest = code.partition("client = get_client(")
    body = "client = get_client(" + rest
    program = head + "\n\nasync def main():\n" + textwrap.indent(body, "    ") + \
        "\n    await client.aclose()  # (the thread stream the doc leaves open ends here)" \
        "\n    return thread, client, sync\n"
    namespace: dict = {}
    exec(compile(program, "docs/server.md", "exec"), namespace)  # noqa: S102 - the doc's own code
    thread, client, sync = asyncio.run(namespace["main"]())
    got = sync.threads.get(thread["thread_id"])
    # the third run, a new turn, paused for approval as the first did
    assert got["status"] == "interrupted" and got["values"]["answer"] == "yes"
    runs = sync.runs.list(thread["thread_id"])
    assert len(runs) == 3 and {r["status"] for r in runs} <= {"success", "interrupted"}
