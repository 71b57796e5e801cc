"""Environment lookups answer from the registry and the disk; they never import a package."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import manifest

EXISTS = "/api/cli/v1/environments/exists"


@pytest.fixture
def probe_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A package on sys.path that leaves a marker file if it is ever imported."""
    name = "arena_import_probe"
    marker = tmp_path / "imported"
    pkg = tmp_path / "site" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (pkg / "envs.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return name, marker


def test_exists_never_imports_what_it_looks_up(server: Any, probe_package: Any) -> None:
    _, api = server
    name, marker = probe_package
    had_this = "this" in sys.modules
    answers = {}
    for query in ("this.x", f"{name}.envs", f"{name}.nothing", f"{name}.envs:Env-v0",
                  f"{name}:Env-v0", "CartPole-v1", "NoSuchEnv-v0"):
        resp = api.http.get(EXISTS, params={"name": query})
        assert resp.status_code == 200, resp.text
        answers[query] = resp.json()["data"]["exists"]
    assert not marker.exists(), "a lookup imported the package it was asked about"
    assert ("this" in sys.modules) == had_this
    assert answers == {"this.x": False, f"{name}.envs": True, f"{name}.nothing": False,
                       f"{name}.envs:Env-v0": False, f"{name}:Env-v0": False,
                       "CartPole-v1": True, "NoSuchEnv-v0": False}


def test_submitting_a_module_id_does_not_import_it(make_server: Any,
                                                  probe_package: Any) -> None:
    _, api = make_server(allow_custom_code=True, job_command=[sys.executable, "-c", "0"])
    name, marker = probe_package
    man = manifest()
    man["environment"]["name"] = f"{name}.envs:Probe-v0"
    api.submit_raw({"manifest": man})
    assert not marker.exists()
