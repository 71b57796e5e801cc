"""MuJoCo environments name the ``[mujoco]`` extra when the package is missing."""

from __future__ import annotations

import importlib.util

from agilerl.models import env_checks


def test_missing_mujoco_names_the_extra(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == "mujoco" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    finding = env_checks.check_gym_id("HalfCheetah-v4")
    assert finding is not None and finding.kind == "missing_package"
    assert "pip install 'agilerl[mujoco]'" in finding.message + str(finding.suggestion)
