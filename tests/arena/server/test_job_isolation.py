"""What a job can see of the server: an allow-listed environment, and (where the kernel has
Landlock) nothing of the data folder beyond its own experiment folder."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agilerl.arena.server.sandbox import landlock_abi

from .conftest import manifest

#: a job that reports what it can see, as one JSON line on stdout.
PROBE = r"""
import json, os, sys
data = sys.argv[1]
seen = {"env": sorted(os.environ), "home": os.environ.get("HOME"), "cwd": os.getcwd()}
for name, path in (("secret", os.path.join(data, "jwt_secret")),
                   ("database", os.path.join(data, "arena.sqlite3")),
                   ("other_run", os.path.join(data, "experiments", "1", "manifest.json")),
                   ("own_manifest", "manifest.json"), ("system", "/etc/hostname")):
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        seen[name] = "read"
    except OSError as exc:
        seen[name] = exc.strerror
try:
    with open("written.txt", "w") as fh:
        fh.write("ok")
    seen["own_write"] = "ok"
except OSError as exc:
    seen["own_write"] = exc.strerror
print(json.dumps(seen), flush=True)
"""


def _probe(api: Any, name: str) -> dict[str, Any]:
    api.submit(manifest(100), experiment_name=name)
    row = api.wait(name, {"COMPLETED", "FAILED"})
    lines = [e["message"] for e in api.logs(name) if e["kind"] == "log"]
    assert row["state"] == "COMPLETED", (row, lines)
    return dict(json.loads(next(line for line in lines if line.startswith("{"))))


def _probe_server(make_server: Any, tmp_path: Path, **config: Any) -> Any:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    data_dir = tmp_path / "srv-data"
    return make_server(data_dir=data_dir,
                       job_command=[sys.executable, str(script), str(data_dir.resolve())],
                       **config)


def test_jobs_get_an_allow_listed_environment(make_server: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    monkeypatch.setenv("ARENA_API_KEY", "do-not-leak")
    monkeypatch.setenv("LC_TIME", "C")
    _, api = _probe_server(make_server, tmp_path, extra_env={"JOB_FLAG": "1"})
    seen = _probe(api, "env")
    allowed = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH",
               "CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "SSL_CERT_FILE", "SSL_CERT_DIR", "HOME", "TMPDIR", "PYTHONPATH",
               "PYTHONUNBUFFERED", "JOB_FLAG", "LC_CTYPE"}  # LC_CTYPE: Python may set it
    env = set(seen["env"])
    assert "AWS_SECRET_ACCESS_KEY" not in env and "ARENA_API_KEY" not in env
    assert "LC_TIME" in env and "JOB_FLAG" in env and "PATH" in env
    assert env - allowed - {k for k in env if k.startswith("LC_")} == set()
    assert seen["home"] == seen["cwd"] and Path(seen["cwd"]).name == "1"


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_sandboxed_jobs_cannot_read_the_data_folder(make_server: Any, tmp_path: Path) -> None:
    _, api = _probe_server(make_server, tmp_path)
    _probe(api, "first")
    seen = _probe(api, "second")  # experiment 2; experiment 1 is another run
    assert seen["secret"] == os.strerror(13) and seen["database"] == os.strerror(13)
    assert seen["other_run"] == os.strerror(13)
    assert seen["own_manifest"] == "read" and seen["own_write"] == "ok"
    assert seen["system"] in ("read", os.strerror(2))  # the rest of the system is readable


def test_without_the_sandbox_the_secret_is_readable(make_server: Any, tmp_path: Path) -> None:
    """What --no-job-sandbox (or a kernel without Landlock) means, as documented."""
    _, api = _probe_server(make_server, tmp_path, job_sandbox=False)
    assert _probe(api, "open")["secret"] == "read"
