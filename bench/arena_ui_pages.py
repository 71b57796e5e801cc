"""The Arena server's pages in headless Chromium: how long each takes to load, and (with
``--screenshots``) the pictures in docs/images/arena_ui_*.png.

A real server (``agilerl.arena.server.testing.running_server``, uploads allowed) runs two
experiments with the test suite's scripted worker (``tests/arena/server/job_script.py``:
it counts steps and writes checkpoints, no training); the finished one's run folder then
gets synthetic curves and events (``bench/dashboard_synthetic.py``) so the run page has
something to draw. The environments page is shown after uploading the custom-environment
walkthrough's LineWorld (``docs/examples/line_world``), its stages streamed as it validates.

    python bench/arena_ui_pages.py [--repeat 3] [--screenshots docs/images] [--chromium PATH]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from dashboard_pages import find_chromium  # noqa: E402
from dashboard_synthetic import write_run  # noqa: E402

from agilerl.arena.server.testing import running_server  # noqa: E402

JOBS = "/api/cli/v1/experiments/jobs"
WORKER = [sys.executable, str(ROOT / "tests" / "arena" / "server" / "job_script.py")]
LINE_WORLD = ROOT / "docs" / "examples" / "line_world" / "line_world.py"


def _manifest(max_steps: int) -> dict[str, Any]:
    return {"algorithm": {"name": "PPO"}, "environment": {"name": "CartPole-v1", "num_envs": 2},
            "training": {"max_steps": max_steps, "evo_steps": 100, "pop_size": 8,
                         "checkpoint_steps": max_steps // 4}}


def _submit(http: httpx.Client, name: str, max_steps: int) -> int:
    answer = http.post(JOBS + "/submit", json={"manifest": _manifest(max_steps),
                                                "experiment_name": name})
    answer.raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = http.get(JOBS + "/status", params={"experiment_name": name}).json()["data"]
        if row["state"] in ("RUNNING", "COMPLETED"):
            return int(row["id"])
        time.sleep(0.1)
    raise RuntimeError(f"{name} never started")


def _archive() -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = LINE_WORLD.read_bytes()
        info = tarfile.TarInfo("line_world.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path = Path(tempfile.mkdtemp()) / "line_world.tar.gz"
    path.write_bytes(buf.getvalue())
    return str(path)


def _ready(page: Any, url: str) -> float:
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    return float(page.get_attribute("body", "data-ready-ms") or "nan")


def _shot(page: Any, folder: Path | None, name: str) -> None:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        page.wait_for_timeout(300)
        page.screenshot(path=str(folder / f"arena_ui_{name}.png"), full_page=True)


def _upload(page: Any) -> None:
    form = page.locator("#env-upload")
    form.locator("input[name=name]").fill("LineWorld")
    form.locator("input[name=description]").fill("Walk right along a line (the walkthrough)")
    form.locator("#env-file").set_input_files(_archive())
    form.locator("input[name=do_rollouts]").check()
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#stages li[data-stage='profiling'][data-status='completed']",
                           timeout=300_000)


def browse(srv: Any, finished: int, chromium: str, repeat: int, shots: Path | None) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        _ready(page, srv.base_url + "/")
        _shot(page, shots, "login")
        page.fill("#api-key", srv.token)
        page.click("#login button[type=submit]")
        page.wait_for_selector("body[data-view='runs'][data-ready='1']")
        for view, route in (("experiments", "#/"), ("run", f"#/run/{finished}"),
                            ("environments", "#/environments"), ("datasets", "#/datasets")):
            times = [_ready(page, f"{srv.base_url}/{route}") for _ in range(repeat)]
            print(f"{view:12s} load {statistics.median(times):6.0f} ms median of {len(times)}"
                  f" (min {min(times):.0f}, max {max(times):.0f})")
            if view == "run":
                page.wait_for_selector("#job-log:has-text('done')", timeout=20_000)
            if view == "environments" and shots is not None:
                _upload(page)
            _shot(page, shots, view)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--screenshots", type=Path)
    parser.add_argument("--chromium")
    args = parser.parse_args()
    chromium = find_chromium(args.chromium)
    if chromium is None:
        sys.exit("no Chromium found: install Debian's chromium package or pass --chromium")
    with tempfile.TemporaryDirectory() as tmp, running_server(
            Path(tmp), user="alice", job_command=WORKER, allow_custom_code=True,
            env_profile_s=0.5, extra_env={"JOB_STEP_S": "0.5"}) as srv:
        with httpx.Client(base_url=srv.base_url, headers=srv.headers, timeout=60) as http:
            http.post("/api/cli/v1/datasets/create", data={
                "name": "maths-qa", "category": "reasoning", "description": "Two sums",
                "column_mapping": '{"question": "q", "answer": "a"}'},
                files={"file": ("qa.csv", b"q,a\nwhat is 1+1?,2\nwhat is 2+2?,4\n")}
            ).raise_for_status()
            finished = _submit(http, "ppo-cartpole-baseline", 800)
            _submit(http, "ppo-cartpole-wide", 40_000)
            while http.get(JOBS + "/status", params={"experiment_name": "ppo-cartpole-baseline"}
                           ).json()["data"]["state"] != "COMPLETED":
                time.sleep(0.2)
        run = srv.data_dir / "experiments" / str(finished) / "run"
        shutil.rmtree(run)
        write_run(run, 60, 8, algorithm="PPO", env="CartPole-v1", seed=1, finished=True)
        browse(srv, finished, chromium, args.repeat, args.screenshots)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
