"""Headless Chromium for the report tests: Debian's chromium and
chromium-driver driven through selenium, with the network blocked and every
request and console message recorded.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from parts import needs

try:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # the tests that need them fail under CI=true, skip elsewhere
    ActionChains = By = Keys = None

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000", "--hide-scrollbars")
BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]


def have_browser() -> bool:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return False
    return Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()


needs_browser = needs("headless Chromium (Debian's chromium and chromium-driver, selenium; ci/setup)",
                      have_browser())


class Browser:
    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={self.profile.name}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        self.driver.execute_cdp_cmd("Network.enable", {})
        self.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": BLOCKED})
        self.url = None
        self.seen: list[str] = []
        self.messages: list[dict] = []

    def open(self, page: Path) -> None:
        """Load a page from file:// and wait until its treemap is drawn."""
        self.driver.get("about:blank")
        self.driver.get_log("performance")  # drop what came before
        self.driver.get_log("browser")
        self.seen, self.messages = [], []
        self.url = page.resolve().as_uri()
        self.driver.get(self.url)
        deadline = time.monotonic() + 60
        while not self.js("return document.body && document.body.getAttribute('data-drawn-ms')"):
            if time.monotonic() > deadline:
                raise AssertionError(f"the treemap of {page} was never drawn; console: {self.console()}")
            time.sleep(0.05)

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def requests(self) -> list[str]:
        """URLs the page asked for since it was opened (its own included)."""
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                params = message["params"]
                if params.get("documentURL") == self.url or params["request"]["url"] == self.url:
                    self.seen.append(params["request"]["url"])
        return list(self.seen)

    def console(self) -> list[dict]:
        """Console messages since the page was opened."""
        self.messages += self.driver.get_log("browser")
        return list(self.messages)

    def close(self) -> None:
        self.driver.quit()
        self.profile.cleanup()
