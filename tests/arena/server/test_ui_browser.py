"""Issue 22 item 3: the Arena server's pages in a real browser (headless Chromium through
Playwright), against a real server.

Skipped, with the reason, when Chromium or Playwright is absent (``.ci/run`` installs
Debian's chromium; the dev extra brings Playwright).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agilerl.arena.server.testing import RunningServer

from .conftest import Api, manifest
from .envsources import BROKEN, LINE_WORLD, tar_gz

CHROMIUM = next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)
if CHROMIUM is None:
    pytest.skip("no chromium on PATH: install Debian's chromium package (.ci/run does)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed (pip install -e '.[dev]')")
XSS = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(2)>"
#: the pages poll every 2 s; a change must show within a few polls.
LIVE_TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as play:
        launched = play.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page that records dialogs, uncaught errors and console errors (CSP violations);
    a refused request's console line (the 401 the login check expects) is not one."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.problems = []
    opened.on("dialog", lambda dialog: (opened.problems.append(f"dialog: {dialog.message}"),
                                        dialog.dismiss()))
    opened.on("pageerror", lambda error: opened.problems.append(f"error: {error}"))
    opened.on("console", lambda message: message.type == "error"
              and "status of 401" not in message.text
              and opened.problems.append(f"console: {message.text}"))
    yield opened
    context.close()


def _sign_in(page: Any, srv: RunningServer, token: str | None = None) -> None:
    page.goto(srv.base_url + "/")
    page.wait_for_selector("body[data-view='login'][data-ready='1']")
    page.fill("#api-key", token or srv.token)
    page.click("#login button[type=submit]")
    page.wait_for_selector("body[data-view='runs'][data-ready='1']")


def _finished(api: Api, name: str) -> dict[str, Any]:
    api.submit(manifest(400, checkpoint_steps=100), experiment_name=name)
    return api.wait(name, {"COMPLETED"})


def test_a_request_without_a_token_is_refused_and_the_page_asks_for_a_key(page, server):
    srv, api = server
    _finished(api, "secret-run")
    refused = page.context.request.get(srv.base_url + "/api/ui/runs")
    assert refused.status == 401
    page.goto(srv.base_url + "/#/")
    page.wait_for_selector("body[data-view='login'][data-ready='1']")
    assert page.locator("#runs").count() == 0 and "secret-run" not in page.content()
    page.fill("#api-key", "arena_pat_wrong")
    page.click("#login button[type=submit]")
    page.wait_for_selector("#login-message:has-text('Invalid API key')")
    assert page.locator("#nav").is_hidden()
    assert page.context.cookies() == []  # credentials never travel in a cookie
    assert page.problems == []


def test_signing_in_lists_the_experiments_and_opens_the_job(page, server):
    srv, api = server
    _finished(api, "cart-ui")
    _sign_in(page, srv)
    row = page.locator("#runs tbody tr")
    assert row.count() == 1
    assert row.locator(".c-name").inner_text() == "cart-ui"
    assert row.locator(".c-status").inner_text() == "completed"
    assert page.locator("#who").inner_text() == f"signed in as {srv.user}"
    row.locator("a.runlink").click()
    page.wait_for_selector("body[data-view='run'][data-ready='1']")
    assert page.locator("#run-title").inner_text() == "cart-ui"
    assert page.locator("#job-state").inner_text() == "COMPLETED"
    page.wait_for_selector("#job-log:has-text('training to 400 steps')")
    assert page.locator("#job-stop").is_disabled() and page.locator("#job-resume").is_enabled()
    assert page.locator("#files .checkpoints tbody tr").count() == 4
    with page.expect_download() as waiting:
        page.click("#job-download")
    # the best checkpoint: the test worker scores step % 7, so step 300 wins
    assert waiting.value.suggested_filename == "cart-ui_step_300.tar.gz"
    with page.expect_download() as waiting:  # a link of the table, fetched with the key
        page.locator("#files .checkpoints tbody tr").first.locator("a").click()
    assert waiting.value.suggested_filename == "cart-ui_step_100.tar.gz"
    page.click("#logout")
    page.wait_for_selector("body[data-view='login'][data-ready='1']")
    assert page.problems == []


def test_a_device_login_signs_the_page_in_and_renews_its_token(page, server):
    srv, api = server
    _finished(api, "by-device")
    page.goto(srv.base_url + "/#/")
    page.wait_for_selector("body[data-view='login'][data-ready='1']")
    page.click("#device-start")
    code = page.locator("#device-code")
    code.wait_for()
    assert page.locator("#device-box a").get_attribute("href").endswith(
        f"/device?user_code={code.inner_text()}")
    approved = api.post("/api/admin/device/approve", {"user_code": code.inner_text()})
    assert approved.status_code == 200, approved.text
    page.wait_for_selector("body[data-view='runs'][data-ready='1']", timeout=LIVE_TIMEOUT_MS)
    assert page.locator("#runs .c-name").inner_text() == "by-device"
    # an access token that stopped working is renewed with the refresh token, unseen
    page.evaluate("sessionStorage.setItem('arena-token', 'expired.jwt.token')")
    page.reload()
    page.wait_for_selector("body[data-view='runs'][data-ready='1']")
    assert page.locator("#runs .c-name").inner_text() == "by-device"
    assert page.evaluate("sessionStorage.getItem('arena-token')") != "expired.jwt.token"
    assert page.problems == []


def test_stop_and_resume_from_the_job_card(page, make_server):
    srv, api = make_server(extra_env={"JOB_STEP_S": "0.2"})
    api.submit(manifest(50_000, checkpoint_steps=100), experiment_name="long")
    api.wait("long", {"RUNNING"})
    _sign_in(page, srv)
    page.click("#runs a.runlink")
    page.wait_for_selector("body[data-view='run'][data-ready='1']")
    page.wait_for_selector("#job-stop:not([disabled])", timeout=LIVE_TIMEOUT_MS)
    page.click("#job-stop")
    page.wait_for_selector("#job-message.good, #job-message.bad")
    assert page.locator("#job-message").inner_text().startswith("Stop requested")
    api.wait("long", {"STOPPED"})
    page.wait_for_selector("#job-state:has-text('STOPPED')", timeout=LIVE_TIMEOUT_MS)
    page.wait_for_selector("#job-resume:not([disabled])", timeout=LIVE_TIMEOUT_MS)
    page.fill("#resume-steps", "60000")
    page.click("#job-resume")
    page.wait_for_selector("#job-message.good, #job-message.bad")
    assert page.locator("#job-message").inner_text().startswith("Resumed: the job is QUEUED")
    assert api.status("long")["max_steps"] == 60_000
    api.post("/api/cli/v1/experiments/jobs/stop", {"experiment_name": "long"})
    assert page.problems == []


def test_an_experiment_named_like_a_script_renders_as_text(page, server):
    srv, api = server
    row = _finished(api, "renamed")
    # the API refuses such a name; the page must not rely on that
    with sqlite3.connect(srv.data_dir / "arena.sqlite3") as db:
        db.execute("UPDATE experiments SET name = ?, environment = ? WHERE id = ?",
                   (XSS, XSS_IMG, row["id"]))
    _sign_in(page, srv)
    cells = page.locator("#runs tbody tr")
    assert cells.locator(".c-name").inner_text() == XSS
    assert cells.locator(".c-env").inner_text() == XSS_IMG
    assert page.locator("#runs img").count() == 0 and page.locator("#app script").count() == 0
    # a log line the job printed
    line = json.dumps({"seq": 99, "ts": "2026-01-01T00:00:00Z", "stream": "stdout",
                       "message": XSS_IMG})
    with (srv.data_dir / "experiments" / str(row["id"]) / "logs.ndjson").open("a") as log:
        log.write(line + "\n")
    cells.locator("a.runlink").click()
    page.wait_for_selector("body[data-view='run'][data-ready='1']")
    assert page.locator("#run-title").inner_text() == XSS
    page.wait_for_selector("#job-log:has-text('onerror')")
    assert page.locator("#job-log").inner_text().strip().endswith(XSS_IMG)
    assert page.locator("#job-log img").count() == 0
    assert page.problems == []  # no alert dialog, no error


def test_an_environment_upload_shows_its_validation_stages(page, make_server, tmp_path: Path):
    srv, _ = make_server(allow_custom_code=True, env_profile_s=0.3)
    archive = tmp_path / "line_world.tar.gz"
    archive.write_bytes(tar_gz({"line_world.py": LINE_WORLD}))
    _sign_in(page, srv)
    page.click("#nav a[href='#/environments']")
    page.wait_for_selector("body[data-view='environments'][data-ready='1']")
    form = page.locator("#env-upload")
    form.locator("input[name=name]").fill("LineWorld")
    form.locator("input[name=description]").fill(XSS_IMG)
    form.locator("#env-file").set_input_files(str(archive))
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#stages li[data-stage='upload'][data-status='completed']",
                           timeout=60_000)
    page.wait_for_selector("#stages li[data-stage='profiling'][data-status='completed']",
                           timeout=180_000)
    items = page.locator("#stages > li")
    stages = [items.nth(i).get_attribute("data-stage") for i in range(items.count())]
    assert stages[:1] == ["upload"] and {"install", "validation", "profiling"} <= set(stages)
    assert page.locator("#stages li[data-stage='validation'] li.check.passed").count() >= 3
    assert page.locator("#upload-message").inner_text() == "Registered and validated."
    row = page.locator("#environments tr[data-env='LineWorld:v1']")
    row.wait_for(timeout=LIVE_TIMEOUT_MS)
    assert row.locator(".c-description").inner_text() == XSS_IMG
    assert page.locator("#environments img").count() == 0
    # a broken environment: the failed stage and the check that failed, with its reason
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(tar_gz({"line_world.py": BROKEN["wrong_spaces"]}))
    form.locator("input[name=name]").fill("Broken")
    form.locator("#env-file").set_input_files(str(broken))
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#stages li[data-stage='validation'][data-status='failed']",
                           timeout=180_000)
    failed = page.locator("#stages li.check.failed").first.inner_text()
    assert failed.startswith("✗ Reset") and "shape (3,)" in failed
    assert page.locator("#upload-message").inner_text().startswith("Not validated")
    assert page.problems == []


def test_a_dataset_upload_is_listed(page, server, tmp_path: Path):
    srv, _ = server
    data = tmp_path / "pairs.csv"
    data.write_text("question,answer\nwhat is 1+1?,2\nwhat is 2+2?,4\n")
    _sign_in(page, srv)
    page.click("#nav a[href='#/datasets']")
    page.wait_for_selector("body[data-view='datasets'][data-ready='1']")
    form = page.locator("#dataset-upload")
    form.locator("input[type=text]").first.fill("maths")
    form.locator("select").select_option("reasoning")
    form.locator("#dataset-file").set_input_files(str(data))
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#dataset-message:has-text('Stored maths: 2 rows.')")
    page.wait_for_selector("#datasets tr[data-dataset='maths']", timeout=LIVE_TIMEOUT_MS)
    assert page.problems == []
