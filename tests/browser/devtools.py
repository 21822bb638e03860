"""Headless Chromium over the DevTools protocol, for the browser tests (the analytics report, the web console).

The smallest client that does the job: commands by id, every event kept, no third-party driver. ``chromium``
starts a browser with a throw-away profile and yields a connected ``DevTools``; ``Page`` is one tab of it, with
the few things a test needs (navigate, evaluate, wait for a condition, click like a person, screenshot) and the
problems the page reported (exceptions, console errors, failed loads). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)


def chromium_binary() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "chrome"):
        if name and (found := shutil.which(name)):
            return found
    return None


class DevTools:
    """The smallest DevTools client: commands by id, every event kept."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            if message.type is not aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            waiter = self.pending.pop(data["id"], None) if "id" in data else None
            if waiter is not None and not waiter.done():
                waiter.set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = waiter
        await self.ws.send_str(json.dumps(message))
        answer = await asyncio.wait_for(waiter, 60)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    async def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events:
                    if event["method"] == method:
                        return event
                await asyncio.sleep(0.02)


@asynccontextmanager
async def chromium(binary: str, profile: Path, start_timeout: float = 60) -> AsyncIterator[DevTools]:
    """A headless Chromium with its profile in ``profile``, connected; stopped (killed if need be) at the end."""
    process = await asyncio.create_subprocess_exec(
        binary,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "about:blank",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        async with asyncio.timeout(start_timeout):
            while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
                await asyncio.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0) as ws,
        ):
            tools = DevTools(ws)
            try:
                yield tools
            finally:
                tools.reader.cancel()
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


class Page:
    """One tab: ``await Page.open(tools, width, height)``."""

    def __init__(self, tools: DevTools, session: str) -> None:
        self.tools = tools
        self.session = session

    @classmethod
    async def open(cls, tools: DevTools, width: int = 1280, height: int = 900) -> Page:
        target = await tools.send("Target.createTarget", {"url": "about:blank"})
        attached = await tools.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        page = cls(tools, attached["sessionId"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            await page.send(f"{domain}.enable")
        await page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        return page

    async def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self.tools.send(method, params, self.session)

    async def navigate(self, url: str, timeout: float = 30) -> None:
        self.tools.events = [e for e in self.tools.events if e["method"] != "Page.loadEventFired"]
        navigated = await self.send("Page.navigate", {"url": url})
        if navigated.get("errorText"):
            raise AssertionError(f"navigation to {url} failed: {navigated['errorText']}")
        await self.tools.wait_for("Page.loadEventFired", timeout)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if it is a promise); a thrown exception fails the test."""
        answer = await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise AssertionError(f"{expression!r} threw: {details.get('exception', {}).get('description') or details}")
        return answer["result"].get("value")

    async def wait_until(self, expression: str, timeout: float, what: str) -> Any:
        """Polls ``expression`` until it is truthy; fails saying ``what`` it waited for, and the last value."""
        value: Any = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    value = await self.evaluate(expression)
                    if value:
                        return value
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last value {value!r})") from None

    async def click(self, selector: str) -> None:
        """Clicks the middle of the first element ``selector`` matches, with real mouse events."""
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise AssertionError(f"nothing on the page matches {selector}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            )

    async def screenshot(self, full_page: bool = False) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        shot = await self.send("Page.captureScreenshot", params)
        return base64.b64decode(shot["data"])

    def problems(self) -> list[str]:
        """Exceptions, console errors and warnings, log errors and failed loads the page reported so far."""
        found: list[str] = []
        for event in self.tools.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append(f"console {params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry'].get('text')}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                found.append(f"failed load: {params.get('errorText')} ({params.get('requestId')})")
        return found
