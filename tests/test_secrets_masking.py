"""Known secrets are masked in everything threadloom stores or prints (issue 17): a real
loopback server answers 401/500 with bodies that echo the key and the headers; the key
must not reach ``ModelError``'s text or body, the error saved in the checkpoint database,
the CLI's output, or the HTTP client's INFO log; credentials in ``base_url`` are masked in
logs, and the query form builds a correct request URL."""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypedDict

import pytest

from threadloom import END, START, StateGraph
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.errors import ModelError, ModelHTTPError
from threadloom.models import OpenAIChatModel
from threadloom.redact import is_secret_header, mask_secrets, register_secrets

KEY = "sk-live-ECHOED-KEY-0123456789"
COOKIE = "sid=COOKIE-SECRET-4567"
SESSION = "SESSION-SECRET-89ab"
PASSWORD = "url-PASSWORD-cdef"
QUERY_KEY = "QUERY-KEY-SECRET-0f0f"
BASIC = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()  # what userinfo is sent as
SECRETS = (KEY, "COOKIE-SECRET-4567", SESSION, PASSWORD, QUERY_KEY, BASIC)
REPLY = {"id": "c1", "object": "chat.completion", "model": "m", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}


class EchoServer:
    """Answers by path: ``/e401/`` 401 naming the bearer token, ``/e500/`` 500 echoing the
    request line and every header, anything else a chat completion. Records paths."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                server.paths.append(self.path)
                token = (self.headers.get("authorization") or "").partition(" ")[2]
                if self.path.startswith("/e401/"):
                    status, body = 401, {"error": {
                        "message": f"Incorrect API key provided: {token}",
                        "code": "invalid_api_key"}}
                elif self.path.startswith("/e500/"):
                    status, body = 500, {"error": {
                        "message": f"upstream failed for {self.path} with headers "
                                   f"{dict(self.headers.items())}", "echo": [token]}}
                else:
                    status, body = 200, REPLY
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, prefix: str, *, auth: bool = False, query: bool = False) -> str:
        host = f"bob:{PASSWORD}@" if auth else ""
        tail = f"?api-key={QUERY_KEY}" if query else ""
        return f"http://{host}127.0.0.1:{self.httpd.server_address[1]}/{prefix}/v1{tail}"


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def _model(url: str) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=url, api_key=KEY, max_retries=0,
                           default_headers={"Cookie": COOKIE, "X-Session-Id": SESSION,
                                            "X-Title": "my app"})


def _assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked in: {text[:500]}"


@pytest.mark.parametrize(("prefix", "auth"), [("e401", False), ("e401", True),
                                             ("e500", False), ("e500", True)])
def test_model_error_masks_the_echoed_key_and_headers(echo, prefix: str, auth: bool) -> None:
    with pytest.raises(ModelHTTPError) as info:
        _model(echo.url(prefix, auth=auth, query=True)).invoke("hi")
    err = info.value
    assert err.status_code == (401 if prefix == "e401" else 500)
    _assert_clean(str(err))
    _assert_clean(json.dumps(err.body))
    assert "***" in str(err)
    if prefix == "e500":
        assert "my app" in str(err)  # a header that is no credential stays readable


class S(TypedDict, total=False):
    q: str


def test_saved_error_write_in_the_checkpoint_db_is_masked(echo, tmp_path) -> None:
    model = _model(echo.url("e401"))

    def call(state: S) -> dict:
        model.invoke("hi")
        return {}

    db = tmp_path / "cp.sqlite"
    graph = StateGraph(S).add_node("call", call).add_edge(START, "call").add_edge(
        "call", END).compile(checkpointer=SqliteCheckpointer(str(db)))
    with pytest.raises(ModelError):
        graph.invoke({"q": "x"}, {"configurable": {"thread_id": "secret-t1"}})
    saved = graph.get_state({"configurable": {"thread_id": "secret-t1"}})
    errors = [t.error for t in saved.tasks if t.error]
    assert errors and "***" in str(errors[0])
    _assert_clean(str(errors))
    with sqlite3.connect(db) as conn:  # nowhere in the file, in any table
        dump = "\n".join(conn.iterdump())
    _assert_clean(dump)


GRAPH_MODULE = '''
import os
from typing import TypedDict
from threadloom import END, START, StateGraph
from threadloom.models import OpenAIChatModel

class S(TypedDict, total=False):
    q: str

def call(state):
    OpenAIChatModel("m", base_url=os.environ["ECHO_URL"], api_key=os.environ["ECHO_KEY"],
                    max_retries=0, default_headers={"Cookie": os.environ["ECHO_COOKIE"]}
                    ).invoke("hi")
    return {}

graph = StateGraph(S).add_node("call", call).add_edge(START, "call").add_edge("call", END)
'''


def test_cli_output_masks_the_key(echo, tmp_path) -> None:
    (tmp_path / "echo_graph.py").write_text(GRAPH_MODULE)
    env = {**os.environ, "ECHO_URL": echo.url("e500"), "ECHO_KEY": KEY, "ECHO_COOKIE": COOKIE,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parent.parent)])}
    proc = subprocess.run(
        [sys.executable, "-m", "threadloom.cli", "run", "echo_graph:graph", "--db",
         str(tmp_path / "cli.sqlite"), "--thread", "secret-cli"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert "HTTP 500" in proc.stderr
    _assert_clean(proc.stdout + proc.stderr)
    shown = subprocess.run(
        [sys.executable, "-m", "threadloom.cli", "threads", "show", "secret-cli", "--db",
         str(tmp_path / "cli.sqlite")], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL)
    _assert_clean(shown.stdout + shown.stderr)


def test_base_url_credentials_never_logged_in_clear(echo, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    model = _model(echo.url("ok", auth=True, query=True))
    assert model.invoke("hi").text == "ok"
    messages = [r.getMessage() for r in caplog.records]
    assert any("HTTP Request" in m for m in messages)  # httpx logged the request at INFO
    _assert_clean("\n".join(messages))


def test_query_form_builds_a_correct_request_url(echo) -> None:
    model = _model(echo.url("ok", query=True))
    assert model.invoke("hi").text == "ok"
    assert echo.paths[-1] == f"/ok/v1/chat/completions?api-key={QUERY_KEY}"
    assert QUERY_KEY not in repr(model) and QUERY_KEY not in model.where


@pytest.mark.parametrize(("name", "value", "secret"), [
    ("Authorization", "Bearer abc", True), ("Cookie", "a=b", True),
    ("X-Session-Id", "s1", True), ("X-Api-Key", "k", True), ("X-Custom", "Bearer t0k3n", True),
    ("X-Title", "my app", False), ("Accept", "application/json", False)])
def test_credential_headers_are_recognised(name: str, value: str, secret: bool) -> None:
    assert is_secret_header(name, value) is secret


def test_registered_secrets_are_masked_with_their_parts() -> None:
    register_secrets("Bearer tok-REGISTERED-1", "a=cookie-REGISTERED-2; b=xy", "ollama",
                     "not-needed", None)
    text = mask_secrets("got tok-REGISTERED-1 and cookie-REGISTERED-2, xy stays")
    assert text == "got *** and ***, xy stays"
    # short values and local servers' placeholder keys are no secrets to hunt for
    assert mask_secrets("ollama says not-needed") == "ollama says not-needed"


@pytest.mark.parametrize(("name", "value"), [
    ("Cookie", COOKIE), ("X-Session-Id", SESSION), ("X-Custom", f"Bearer {KEY}"),
    ("Authorization", f"Bearer {KEY}")])
def test_export_treats_credential_headers_like_api_keys(monkeypatch, name: str,
                                                        value: str) -> None:
    from threadloom.agent.serialize import model_from_dict, model_to_dict
    from threadloom.errors import SecurityError

    model = OpenAIChatModel("m", default_headers={name: value, "X-Title": "my app"})
    with pytest.raises(SecurityError, match=f"default_headers.{name}"):
        model_to_dict(model)
    monkeypatch.setenv("TL_TEST_HEADER_SECRET", value)
    data = model_to_dict(model)
    text = json.dumps(data)
    _assert_clean(text)
    assert data["init_parameters"]["default_headers"] == {
        name: {"env": "TL_TEST_HEADER_SECRET"}, "X-Title": "my app"}
    again = model_from_dict(data, allowed_modules=[])
    assert again.default_headers == {name: value, "X-Title": "my app"}


async def test_a_tool_error_quoting_a_known_key_is_masked_in_the_tool_message() -> None:
    from threadloom.messages import AIMessage
    from threadloom.nodes import ToolNode
    from threadloom.tools import tool

    register_secrets(KEY)

    @tool
    def fetch_quote() -> str:
        """Calls an upstream API."""
        raise RuntimeError(f"upstream refused key {KEY} at http://u:{PASSWORD}@api.example")

    call = {"name": "fetch_quote", "args": {}, "id": "c1", "type": "tool_call"}
    out = await ToolNode([fetch_quote], handle_tool_errors=True)(
        {"messages": [AIMessage(content="", tool_calls=[call])]})
    text = out["messages"][0].content
    assert text.startswith("Error: RuntimeError('upstream refused key ***")
    _assert_clean(text)
