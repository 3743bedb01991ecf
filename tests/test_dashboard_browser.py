"""`triage dashboard` served for real and rendered in headless Chromium, one screenshot per page.

Needs Debian's `chromium` and `chromium-driver` (.ci/run installs them); skipped without them
unless CI is set, where their absence is a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import require_tool
from dashboard_store import JOB, LEMON, write_fault_store

from triage.ports import free_port

CATEGORY = "gpu_fallen_off_bus"
#: page query -> whether the incident's category shows as text on it (charts and dataframes
#: draw on canvases, so only headers, markdown and captions are searchable in the DOM).
PAGES = {
    "fleet": ("", True),
    "job": (f"?page=job&job={JOB}", True),
    "ranks": (f"?page=ranks&job={JOB}", False),
    "gpu": (f"?page=gpu&job={JOB}", False),
    "incident": (f"?page=incident&job={JOB}&incident=0", True),
}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1440,1600",
]


def _browser_paths() -> tuple[str, str]:
    install = "apt-get install chromium chromium-driver (.ci/run does it)"
    return require_tool("chromium", "chromium-browser", install=install), require_tool(
        "chromedriver", install=install
    )


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"triage dashboard exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"triage dashboard did not answer on {url} within {timeout_s:.0f} s")


def _check_reliability(browser) -> None:
    """The Fleet page's reliability section names the lemon node and draws its lost GPU-hours
    chart: one Vega chart whose bars (`g.mark-rect`) have been drawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    section = browser.find_element(By.CSS_SELECTOR, ".st-key-reliability")
    assert section.text.startswith("Reliability") and f"Lemon node: {LEMON}" in section.text
    assert len(section.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart']")) == 1
    (bars,) = WebDriverWait(browser, 30, poll_frequency=0.25).until(
        lambda b: section.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart'] g.mark-rect")
    )
    assert bars.size["height"] > 50 and bars.size["width"] > 50


@pytest.mark.slow
def test_every_page_renders_in_chromium(tmp_path):
    chromium, driver_path = _browser_paths()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    data = write_fault_store(tmp_path / "data")
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    log = (tmp_path / "dashboard.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "triage.cli", "dashboard", "--data-dir", str(data), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    browser = None
    try:
        _wait_healthy(base, proc)
        browser = webdriver.Chrome(service=Service(driver_path), options=options)
        for name, (query, shows_category) in PAGES.items():
            browser.get(base + query)
            wanted = [JOB] + ([CATEGORY] if shows_category else []) + ([LEMON] if name == "fleet" else [])
            try:
                WebDriverWait(browser, 60, poll_frequency=0.5).until(
                    lambda b, wanted=wanted: all(
                        w in b.find_element(By.TAG_NAME, "body").text for w in wanted
                    )
                )
            finally:
                browser.save_screenshot(str(tmp_path / f"{name}.png"))
            body = browser.find_element(By.TAG_NAME, "body").text
            assert "Traceback" not in body, name
            if name == "fleet":
                _check_reliability(browser)
            assert (tmp_path / f"{name}.png").stat().st_size > 10_000, name
    finally:
        if browser is not None:
            browser.quit()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert proc.returncode == 0
    with socket.socket() as s:  # SIGTERM stopped Streamlit too: nothing listens on the port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
