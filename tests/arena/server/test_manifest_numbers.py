"""Manifests submitted to the server are read as bounded as manifest files: numbers out of
a float's range (``1e999``) are refused as invalid JSON, never stored or crash a job."""

from __future__ import annotations

from typing import Any

import pytest

JOBS = "/api/cli/v1/experiments/jobs"


@pytest.mark.parametrize("raw", [
    b'{"manifest": {"algorithm": {"name": "DQN", "lr": 1e999}}}',
    b'{"manifest": {"environment": {"name": "CartPole-v1", "config": {"x": -1e999}}}}',
])
def test_out_of_range_numbers_are_invalid_json(server: Any, raw: bytes) -> None:
    _, api = server
    resp = api.http.post(f"{JOBS}/submit", content=raw,
                         headers={"content-type": "application/json"})
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["error_code"] == "INVALID_JSON" and "out of range" in body["error"]
