"""The dashboard in headless Chromium: how long each page takes to load, and (with
``--screenshots``) the pictures in docs/images/.

Synthetic runs (``bench/dashboard_synthetic.py``: 100 generations x 16 members by default) are
served on a free loopback port; a page counts as loaded when the app has fetched its data
and drawn it (``document.body.dataset.ready``), timed from the navigation's start.

    python bench/dashboard_pages.py [--generations 100] [--pop 16] [--repeat 5]
                                    [--screenshots docs/images] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_synthetic import write_run  # noqa: E402

from agilerl.dashboard import DashboardServer  # noqa: E402

RUNS = [("CartPole-v1-PPO-20261201-120000", "PPO", "CartPole-v1", 1.0),
        ("CartPole-v1-PPO-20261202-093000", "PPO", "CartPole-v1", 0.5),
        ("CartPole-v1-DQN-20261202-141500", "DQN", "CartPole-v1", 0.25)]


def find_chromium(given: str | None = None) -> str | None:
    """The Chromium executable: ``given``, ``$CHROMIUM``, or one on the PATH."""
    for candidate in (given, os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                      "google-chrome"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


def pages(generations: int) -> dict[str, str]:
    """The page of each view (the hash route after the server's URL)."""
    run = quote(RUNS[0][0], safe="")
    both = "&".join(f"run={quote(name, safe='')}" for name, *_ in RUNS)
    return {"runs": "#/", "run": f"#/run/{run}", "compare": f"#/compare?{both}"}


def load_ms(page, url: str) -> float:
    """Milliseconds from the navigation's start to the view drawn with its data, as the
    page measures it (``performance.now()`` when the view is ready)."""
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return float(page.get_attribute("body", "data-ready-ms") or "nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=100)
    parser.add_argument("--pop", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--screenshots", type=Path)
    parser.add_argument("--chromium")
    args = parser.parse_args()
    chromium = find_chromium(args.chromium)
    if chromium is None:
        sys.exit("no Chromium found: install Debian's chromium package or pass --chromium")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, algo, env, pace) in enumerate(RUNS):
            write_run(Path(tmp) / name, args.generations, args.pop, algorithm=algo, env=env,
                      seed=i, finished=i > 0, pace=pace)
        server = DashboardServer([tmp], port=0)
        server.start_background()
        try:
            with sync_playwright() as play:
                browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                for view, route in pages(args.generations).items():
                    times = [load_ms(page, server.url + route) for _ in range(args.repeat)]
                    print(f"{view:8s} load {statistics.median(times):6.0f} ms median of "
                          f"{len(times)} (min {min(times):.0f}, max {max(times):.0f}), "
                          f"{args.generations} generations x {args.pop} members")
                    if args.screenshots:
                        args.screenshots.mkdir(parents=True, exist_ok=True)
                        page.wait_for_timeout(300)
                        page.screenshot(path=str(args.screenshots / f"dashboard_{view}.png"),
                                        full_page=True)
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
