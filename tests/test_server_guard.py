"""Cross-site requests to a key-less server on loopback are refused: an ``Origin`` that
is not an allowed CORS origin (a page's ``text/plain`` POST needs no preflight) and a
``Host`` that is not a loopback name (DNS rebinding) get 403; curl-style requests, the
SDK and allowed origins pass. Real server on 127.0.0.1."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client
from server_harness import running

from threadloom.server.guard import host_name, is_loopback_name

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv"), cors_origins=["http://app.example"]) as base:
        yield base


def test_a_foreign_origin_is_refused_even_with_a_text_plain_body(url):
    before = httpx.post(f"{url}/threads/search", json={}).json()
    r = httpx.post(f"{url}/threads", content=b'{"metadata": {"x": 1}}',
                   headers={"content-type": "text/plain", "origin": "http://evil.example"})
    assert r.status_code == 403 and "evil.example" in r.json()["detail"]
    assert httpx.post(f"{url}/threads/search", json={}).json() == before  # nothing made
    r = httpx.get(f"{url}/assistants/search", headers={"origin": "null"})
    assert r.status_code == 403


def test_allowed_and_same_origin_pass(url):
    r = httpx.post(f"{url}/threads", json={}, headers={"origin": "http://app.example"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "http://app.example"
    pre = httpx.options(f"{url}/threads", headers={
        "origin": "http://app.example", "access-control-request-method": "POST"})
    assert pre.status_code == 200
    host = url.split("//", 1)[1]
    assert httpx.get(f"{url}/ok", headers={"origin": f"http://{host}"}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:2024", "10.0.0.1:80",
                                  "127.0.0.1.evil.example"])
def test_a_non_loopback_host_is_refused(url, host):
    r = httpx.get(f"{url}/ok", headers={"host": host})
    assert r.status_code == 403 and "Host" in r.json()["detail"]


@pytest.mark.parametrize("host", ["localhost", "localhost:9", "127.0.0.1", "[::1]:2024",
                                  "LOCALHOST:1"])
def test_loopback_hosts_pass(url, host):
    assert httpx.get(f"{url}/ok", headers={"host": host}).status_code == 200


async def test_curl_style_and_sdk_requests_pass(url):
    # curl -d sends application/x-www-form-urlencoded and no Origin
    r = httpx.post(f"{url}/threads", content=b'{"metadata": {"via": "curl"}}',
                   headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.json()["metadata"] == {"via": "curl"}
    client = get_client(url=url, api_key=None)
    assert (await client.threads.create())["thread_id"]


def test_host_names():
    assert host_name("[::1]:2024") == "[::1]" and host_name("a:1") == "a"
    assert is_loopback_name("[::1]") and is_loopback_name("127.0.0.2")
    assert not is_loopback_name("example.com") and not is_loopback_name("[::2]")
