"""Debian's Chromium, headless, driven by Selenium: for the inspector tests and the
README screenshot (scripts/screenshot-inspector).

The browser and its driver are the system's (``apt-get install chromium
chromium-driver``); Selenium is given the driver's path, so Selenium Manager never
downloads one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["WINDOW", "BrowserMissing", "find_browser", "start_browser"]

WINDOW = (1366, 768)  # a common laptop screen: the inspector must read well at this size
_BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class BrowserMissing(RuntimeError):
    """Chromium, its driver or Selenium is not installed."""


@dataclass(frozen=True, slots=True)
class BrowserPaths:
    browser: str
    driver: str


def find_browser() -> BrowserPaths:
    """The installed Chromium and chromedriver, or :class:`BrowserMissing` saying what lacks."""
    # PERDURE_CHROMIUM / PERDURE_CHROMEDRIVER name other binaries (a path or a command).
    names = (
        [os.environ.get("PERDURE_CHROMIUM") or ""]
        if "PERDURE_CHROMIUM" in os.environ
        else _BROWSERS
    )
    browser = next((found for name in names if (found := shutil.which(name))), None)
    driver = shutil.which(os.environ.get("PERDURE_CHROMEDRIVER") or "chromedriver")
    if browser is None or driver is None:
        raise BrowserMissing(
            "Chromium and chromedriver are needed (apt-get install chromium chromium-driver)."
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        raise BrowserMissing("Selenium is needed (pip install -e '.[test]').") from None
    return BrowserPaths(browser, driver)


def start_browser() -> WebDriver:
    """A headless Chromium showing pages at :data:`WINDOW` size; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = find_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = paths.browser
    for argument in (
        "--headless=new",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--no-sandbox",  # CI containers run as root, where the sandbox cannot start
        "--disable-dev-shm-usage",  # small /dev/shm in containers
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    service = Service(executable_path=paths.driver)
    driver = webdriver.Chrome(options=options, service=service)
    # The window size includes the browser's own bars: grow it until the page gets WINDOW.
    inner = driver.execute_script("return [innerWidth, innerHeight];")
    driver.set_window_size(2 * WINDOW[0] - inner[0], 2 * WINDOW[1] - inner[1])
    return driver
