"""The web chat page in a real browser: Debian's chromium driven by Playwright (no browser download).

The page talks to a real ``botpsy serve`` on 127.0.0.1. Assistant mode with a scripted model:
the reasoning streams folded, tool calls and results appear as cards, the sensitive call waits
for the Approve button, the answer streams in, and TTFT and tokens/s are shown. A screenshot is
taken and looked at: the file is a PNG and the answer's area is not blank. Model mode with an
endless model: the Stop button ends the request and frees the model.

Skips, saying why, where ``/usr/bin/chromium`` is missing (``runs/setup.sh`` installs it with apt).
Set ``BOTPSY_SCREENSHOT_DIR`` to keep the screenshot.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from botpsy.mcp_tools.host import ToolHost
from botpsy.runtime.scripted import ScriptedBackend
from botpsy.world import World
from tests.agent.conftest import call, turn
from tests.serve.conftest import greedy_defaults
from tests.serve.test_protocol import EndlessBackend, health, wait_until

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags chromium misbehaves on a closed network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ANSWER = "Wi-Fi is off and Alice knows you are running late."

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).is_file(),
                                reason=f"{CHROMIUM} not found: runs/setup.sh installs Debian's chromium with apt")


@pytest.fixture
def browser_page(tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1100, "height": 800})
        try:
            yield context.new_page()
        finally:
            context.close()


@pytest.fixture
def device(tmp_path):
    host = ToolHost(World(str(tmp_path / "device.sqlite"), seed=1))
    yield host
    host.close()


def test_chat_page_streams_steps_asks_to_confirm_and_shows_the_answer(start_server, device, browser_page, tmp_path):
    from playwright.sync_api import expect

    contact = device.world.read("SELECT id FROM contacts ORDER BY id LIMIT 1")[0]["id"]
    scripts = [turn("", call("set_wifi", enabled=False), reasoning="The user wants Wi-Fi off first."),
               turn("", call("send_message", contact_id=contact, text="Running late"), reasoning="Now the message."),
               turn(ANSWER, reasoning="Both are done.")]
    server = start_server(ScriptedBackend(scripts, token_delay_s=0.01), host=device)
    page = browser_page
    page.goto(server.url + "/")
    expect(page.locator("body[data-ready='1']")).to_have_count(1)
    expect(page.locator("#mode")).to_contain_text("assistant mode")
    page.fill("#input", "Turn off Wi-Fi and tell Alice I'm late.")
    page.press("#input", "Enter")

    approve = page.locator(".card.confirm button.approve")
    expect(approve).to_be_visible(timeout=30_000)
    expect(page.locator(".card.confirm")).to_contain_text("send_message")
    approve.click()
    reply = page.locator(".msg.assistant .content").last
    expect(reply).to_have_text(ANSWER, timeout=30_000)
    expect(reply).to_be_visible()
    expect(page.locator("#send")).to_be_enabled(timeout=10_000)  # the stream has ended

    expect(page.locator(".card.confirm .verdict")).to_have_text("approved")
    tools = page.locator(".card.tool")
    expect(tools).to_have_count(2)
    expect(tools.first).to_contain_text("set_wifi")
    expect(tools.nth(1)).to_contain_text('"sent"')
    reasoning = page.locator("details.reasoning").first
    assert reasoning.get_attribute("open") is None  # folded
    expect(reasoning).to_contain_text("Reasoning (")
    assert page.inner_text("#ttft").endswith(" ms")
    assert float(page.inner_text("#tps")) > 0

    shot = tmp_path / "web_chat.png"
    page.screenshot(path=str(shot), full_page=True)
    look_at_screenshot(shot, reply.bounding_box())
    if os.environ.get("BOTPSY_SCREENSHOT_DIR"):
        Path(os.environ["BOTPSY_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(os.environ["BOTPSY_SCREENSHOT_DIR"]) / shot.name)


def look_at_screenshot(path: Path, box: dict) -> None:
    """The file is a real PNG, and where the answer is drawn the pixels vary (text, not a blank box)."""
    from matplotlib.image import imread

    assert path.stat().st_size > 5_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(str(path))[..., :3]
    top, left = int(box["y"]), int(box["x"])
    region = pixels[top:top + int(box["height"]), left:left + int(box["width"])]
    assert region.size > 0
    dark = (region.mean(axis=2) < 0.5).mean()  # share of dark (text) pixels on the light bubble
    assert 0.01 < dark < 0.5, dark
    assert pixels.std() > 0.05


def test_stop_button_ends_the_request_and_frees_the_model(start_server, browser_page):
    from playwright.sync_api import expect

    backend = EndlessBackend(delay_s=0.01)
    server = start_server(backend, defaults=greedy_defaults(max_tokens=4000))
    page = browser_page
    page.goto(server.url + "/")
    expect(page.locator("#mode")).to_contain_text("model mode")
    page.uncheck("#think")
    page.fill("#input", "Count for me.")
    page.click("#send")
    expect(page.locator(".msg.assistant .content")).to_contain_text("w5", timeout=30_000)
    page.click("#stop")
    expect(page.locator(".msg.assistant .note")).to_have_text("stopped")
    wait_until(lambda: not health(server)["queue"]["busy"])
    stopped_at = backend.tokens
    time.sleep(0.3)
    assert backend.tokens - stopped_at <= 1 and backend.tokens < 4000
    expect(page.locator("#send")).to_be_enabled()
