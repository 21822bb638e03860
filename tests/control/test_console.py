"""The web console's routes over real HTTP (issue 18): the page, its files with their types, the security headers,
unknown names and traversal refused; and the two fields ``GET /v1/groups`` gained for its groups page. Every
answer is checked against ``docs/control-api.yaml`` by the control tests' validating client."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import aiohttp
import pytest
from openapi_core import Config, OpenAPI
from openapi_core.deserializing.media_types.util import plain_loads

from broker.control import console
from broker.control.app import last_rebalance
from broker.server.broker import BrokerServer
from tests.control.test_control_api import SPEC_PATH, ControlClient, stable_group, url

TEXT_TYPES = ("text/event-stream", "text/html", "text/css", "text/javascript")


@pytest.fixture(scope="module")
def openapi() -> OpenAPI:
    """The control tests' document, with the console's text types read as text (as the SSE stream's are)."""
    config = Config(extra_media_type_deserializers=dict.fromkeys(TEXT_TYPES, plain_loads))
    return OpenAPI.from_file_path(str(SPEC_PATH), config=config)


def assert_console_headers(headers: Any, content_type: str) -> None:
    assert headers["Content-Type"] == f"{content_type}; charset=utf-8"
    assert headers["Cache-Control"] == "no-cache"
    assert headers["X-Content-Type-Options"] == "nosniff"
    csp = headers["Content-Security-Policy"]
    assert csp == console.CONTENT_SECURITY_POLICY
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    for name in ("script-src", "style-src", "connect-src"):
        assert directives[name] == "'self'", name  # no inline code, no other host
    assert directives["frame-ancestors"] == "'none'"


@pytest.mark.parametrize("path", ["/", "/groups/orders-app", "/groups/a%20b"])
async def test_the_page_is_served_at_the_root_and_per_group(api: ControlClient, path: str) -> None:
    answer = await api.get(path)
    assert answer.status == 200
    assert_console_headers(answer.headers, "text/html")
    page = answer.data.decode()
    assert '<script type="module" src="/console/console.js"></script>' in page
    assert 'data-testid="confirm-dialog"' in page and "<dialog" in page


async def test_every_console_file_is_served_with_its_type(api: ControlClient) -> None:
    shipped = sorted(p.name for p in resources.files("broker.control").joinpath("console").iterdir() if p.is_file())
    assert shipped == sorted(console.FILES), "FILES lists exactly the files in broker/control/console/"
    for name, content_type in console.FILES.items():
        answer = await api.get(url("console", name))
        assert answer.status == 200, name
        assert_console_headers(answer.headers, content_type.split(";")[0])
        assert answer.data == resources.files("broker.control").joinpath("console", name).read_bytes()


async def test_the_console_loads_nothing_from_elsewhere_and_no_inline_code(api: ControlClient) -> None:
    for name in console.FILES:
        text = (await api.get(url("console", name))).data.decode()
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), f"{name} reaches another host"
        assert "@import" not in text and "eval(" not in text and "innerHTML" not in text, name
        assert " style=" not in text and 'setAttribute("style"' not in text, name  # the CSP forbids inline style
        if name.endswith(".js"):
            assert len(text.splitlines()) < 600, name
            imports = re.findall(r'from "([^"]+)"', text)
            assert all(i.startswith("./") and i[2:] in console.FILES for i in imports), (name, imports)
    page = (await api.get("/")).data.decode()
    assert "<script>" not in page and "<style" not in page and " on" not in page.split("<body>")[1].split(">")[0]


@pytest.mark.parametrize("name", ["nosuch.js", "app.py", "...", "console.JS", "index.html.bak", "__init__.py"])
async def test_an_unknown_console_file_is_404(api: ControlClient, name: str) -> None:
    answer = await api.get(url("console", name))
    assert answer.status == 404
    assert answer.headers["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(
    "raw_path",
    [
        "/console/..%2fapp.py",
        "/console/%2e%2e%2fapp.py",
        "/console/..%2F..%2Fcontrol%2Fapp.py",
        "/console/%2e%2e/%2e%2e/app.py",
        "/console/../control/app.py",
        "/console/console%2f..%2f..%2fapp.py",
        "/console/index.html%00",
        "/console//etc/passwd",
    ],
)
async def test_traversal_is_refused(broker: BrokerServer, raw_path: str) -> None:
    """Sent byte for byte (no client-side normalisation): never a file outside the console's list."""
    assert broker.control is not None
    async with aiohttp.ClientSession() as session:
        target = f"http://127.0.0.1:{broker.control.port}{raw_path}"
        async with session.get(aiohttp.client.URL(target, encoded=True)) as response:
            body = await response.read()
            assert response.status in (400, 404), (raw_path, response.status)
            assert b"from __future__" not in body and b"root:" not in body


async def test_a_console_file_answers_head_and_refuses_post(api: ControlClient) -> None:
    async with api.session.head(api.host_url + "/console/console.js") as head:
        assert head.status == 200 and await head.read() == b""
        assert head.headers["Content-Type"] == "text/javascript; charset=utf-8"
    post = await api.call("POST", "/", documented=False)
    assert post.status == 405 and post.error == "POST is not allowed on /"


async def test_list_groups_has_rebalances_and_the_last_one(api: ControlClient, connect: Any) -> None:
    await stable_group(api, connect, "watched", size=2)  # formed by one member, then grown to two
    (group,) = (await api.get("/v1/groups")).json["groups"]
    assert group["rebalances"] == 2
    last = group["last_rebalance"]
    assert last["cause"] == "member_joined" and last["duration_ms"] is not None and last["duration_ms"] >= 0
    started = [e for e in await api.events("watched") if e["event"] == "rebalance_started"]
    assert (last["started_ms"], last["member_id"]) == (started[-1]["ts_ms"], started[-1]["member_id"])
    # A forced rebalance is open until the members rejoin: no duration yet.
    assert (await api.post(url("v1", "groups", "watched", "rebalance"))).status == 200
    (group,) = (await api.get("/v1/groups")).json["groups"]
    assert group["rebalances"] == 3
    assert group["last_rebalance"]["cause"] == "forced" and group["last_rebalance"]["duration_ms"] is None


def test_last_rebalance_of_a_consumer_group_spans_its_epoch_bumps_to_stable() -> None:
    def record(ts: int, event: str, **fields: Any) -> dict[str, Any]:
        return {"ts_ms": ts, "event": event, "group_type": "consumer", **fields}

    records = [
        record(100, "group_epoch_bumped", group_epoch=1, cause="subscription_changed", member_id="a"),
        record(150, "state_changed", to="Stable"),
        record(200, "member_expired", member_id="a", timer="session", timeout_ms=45_000),
        record(200, "group_epoch_bumped", group_epoch=2, cause="member_expired", member_id="a"),
        record(250, "group_epoch_bumped", group_epoch=3, cause="subscription_changed", member_id="b"),
        record(260, "state_changed", to="Reconciling"),
        record(420, "state_changed", to="Stable"),
    ]
    assert last_rebalance(records, consumer=True) == {
        "cause": "member_expired", "member_id": "a", "started_ms": 200, "duration_ms": 220,
    }  # fmt: skip
    assert last_rebalance(records[:6], consumer=True)["duration_ms"] is None  # type: ignore[index]
    assert last_rebalance([], consumer=True) is None
