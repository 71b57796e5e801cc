"""Gymnasium ids this library ships, and where their environments live.

Light on purpose (no Gymnasium, no torch at import): the manifest checker reads
:data:`SHIPPED_ENVS` to know these ids without building anything, and the environment
builders call :func:`register_shipped_envs` before ``gymnasium.make``.
"""

from __future__ import annotations

#: Gymnasium id -> ``"module:Class"`` of its environment.
SHIPPED_ENVS: dict[str, str] = {
    "DummyImage-v0": "agilerl.envs.image_probe:DummyImageEnv",
    "RepeatFirstObservation-v0": "agilerl.envs.memory:RepeatFirstObservationEnv",
    "CartPoleNoVel-v1": "agilerl.envs.memory:CartPoleNoVelocity",
}


def register_shipped_envs() -> None:
    """Register :data:`SHIPPED_ENVS` with Gymnasium (ids already registered are kept)."""
    import gymnasium

    for env_id, entry_point in SHIPPED_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=entry_point)
