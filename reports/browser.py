"""The system Chromium, headless: the only browser the suite runs (screenshots of the explorer page).

Nothing downloads a browser: ``chromium()`` finds Debian's ``chromium`` (or ``NEVIR_CHROMIUM``),
and a machine without one publishes the page without its screenshot, saying why.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


#: Chromium flags that need no GPU, sandbox, network or profile (headless screenshots).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--mute-audio")
#: The state the published screenshot shows: the overview, its verdicts first (docs/outputs.md#the-explorer-page).
SCREENSHOT_STATE = "#view=overview"
SCREENSHOT_SIZE = (1440, 1000)
#: Extra window height cut off the screenshot: headless Chromium paints the sticky columns (the verdicts' status and
#: claim) only down to about 140 px above the window's bottom edge, so those rows' first cells came out blank there.
UNPAINTED_MARGIN = 200


def chromium() -> str | None:
    """The system Chromium (``NEVIR_CHROMIUM`` overrides): the only browser the suite ever runs."""
    path = os.environ.get("NEVIR_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and Path(path).is_file() else None


def screenshot(page: Path, png: Path, state: str = SCREENSHOT_STATE, size: tuple[int, int] = SCREENSHOT_SIZE,
               timeout_s: float = 60.0) -> str | None:
    """A headless-Chromium PNG of ``page`` opened at ``state``; returns why not when it cannot be taken."""
    browser = chromium()
    if browser is None:
        return "no system Chromium (install Debian's chromium; .ci/setup does)"
    with tempfile.TemporaryDirectory(prefix="nevir-chromium-") as profile:
        whole = Path(profile) / "whole.png"
        command = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                   f"--window-size={size[0]},{size[1] + UNPAINTED_MARGIN}", f"--screenshot={whole}",
                   "--virtual-time-budget=3000", Path(page).resolve().as_uri() + state]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"Chromium failed: {type(exc).__name__}: {exc}"
        if done.returncode != 0 or not whole.is_file():
            return f"Chromium exited {done.returncode}: {done.stderr.strip()[-300:]}"
        from matplotlib import image  # PNG in and out only (no figure): imported when a screenshot is taken

        image.imsave(png, image.imread(whole)[:size[1], :size[0]])
    return None
