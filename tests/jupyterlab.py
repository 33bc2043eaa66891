"""A throwaway JupyterLab on 127.0.0.1 with one notebook, for browser tests and screenshots.

Used by tests/test_browser.py and scripts/make_assets.py (the layer-explorer screenshot).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

#: Chromium flags for a headless run with a fresh temporary profile and no network chatter.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(folder: Path, cells: list[str], name: str = "explore.ipynb") -> Iterator[str]:
    """Write a notebook of ``cells`` into ``folder``, serve it with JupyterLab and yield its URL
    (with the token); the server stops on exit."""
    nbformat.write(
        new_notebook(
            cells=[new_code_cell(c) for c in cells], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
        ),
        folder / name,
    )
    settings = folder / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(folder / "settings"), "JUPYTER_RUNTIME_DIR": str(folder / "runtime")}
    command = [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    command += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=(folder / "lab.log").open("w"))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("JupyterLab did not start: " + (folder / "lab.log").read_text()[-2000:])
        yield f"{base}/lab/tree/{name}?token={token}&reset"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_all(page: Any) -> None:  # a Playwright Page
    """Wait for the kernel, then run every cell (Run > Run All Cells)."""
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=120_000)  # the kernel is connected
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-item[data-command='runmenu:run-all']")


def overflowing(urls: list[str], width: int = 1280) -> dict[str, list[str]]:
    """Per page opened in Chromium at ``width`` px: what makes it wider than the window (the
    page's own scroll width, and any element reaching past the right edge that is not inside a
    scrolling box), or nothing."""
    from playwright.sync_api import sync_playwright

    from tests.conftest import require_chromium

    found = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": 900})
        for url in urls:
            page.goto(url)
            page.wait_for_load_state("load")
            found[url] = page.evaluate(
                """(width) => {
                    const out = [];
                    if (document.documentElement.scrollWidth > width) out.push('page ' + document.documentElement.scrollWidth + ' px wide');
                    for (const e of document.querySelectorAll('body *')) {
                        const r = e.getBoundingClientRect();
                        if (r.width === 0 || r.right <= width + 1) continue;
                        let clipped = false;
                        for (let a = e.parentElement; a; a = a.parentElement) {
                            const o = getComputedStyle(a).overflowX;
                            if (o === 'auto' || o === 'scroll' || o === 'hidden') { clipped = true; break; }
                        }
                        if (!clipped) out.push(e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' to ' + Math.round(r.right) + ' px');
                    }
                    return out.slice(0, 8);
                }""",
                width,
            )
        browser.close()
    return {url: problems for url, problems in found.items() if problems}
