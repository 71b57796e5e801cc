"""Weights & Biases run per training run (``--wb``); offline mode needs no account."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from agilerl.logging.base import GLOBAL_STEP_KEY, MetricsLogger, run_timestamp

__all__ = ["WANDB_PROJECT", "WANDB_PROJECT_MULTI_AGENT", "WandbLogger", "wandb_run_name"]

log = logging.getLogger(__name__)

WANDB_PROJECT = "AgileRL"
WANDB_PROJECT_MULTI_AGENT = "AgileRLMultiAgent"
_OFFLINE_MODES = {"offline", "dryrun", "disabled"}


def wandb_run_name(algo: str, env_name: str, timestamp: str | None = None) -> str:
    """``WANDB_NAME`` when set, else ``"{env_name}-EvoHPO-{algo}-{timestamp}"``."""
    return (
        os.environ.get("WANDB_NAME") or f"{env_name}-EvoHPO-{algo}-{timestamp or run_timestamp()}"
    )


class WandbLogger(MetricsLogger):
    """Starts a W&B run and logs each generation's metrics against ``train/global_step``.

    Args:
        algo: algorithm name (run name).
        env_name: environment name (run name).
        init_hp: the run's configuration (the manifest as a dict), stored as the W&B config.
        wandb_api_key: API key; falls back to ``WANDB_API_KEY``. Not needed when
            ``WANDB_MODE`` is ``offline`` (or ``disabled``); online without a key only warns,
            and W&B then uses a key stored by ``wandb login`` if there is one.
        wandb_kwargs: merged over the defaults: ``project``, ``name``, ``config``,
            ``mutation_hyperparams`` (merged into the config), ``addl_args`` (a dict of
            extra ``wandb.init`` arguments); any other key goes to ``wandb.init`` as is.
        project: default project (``AgileRL``; multi-agent loops pass ``AgileRLMultiAgent``).
        timestamp: shared run timestamp (so TensorBoard and W&B names match).
    """

    def __init__(
        self,
        algo: str,
        env_name: str,
        init_hp: Mapping[str, Any] | None = None,
        wandb_api_key: str | None = None,
        wandb_kwargs: Mapping[str, Any] | None = None,
        project: str = WANDB_PROJECT,
        timestamp: str | None = None,
    ):
        import wandb

        mode = os.environ.get("WANDB_MODE", "").lower()
        key = wandb_api_key or os.environ.get("WANDB_API_KEY")
        if mode not in _OFFLINE_MODES:
            if key:
                wandb.login(key=key, relogin=True)
            else:
                log.warning(
                    "No W&B API key: pass --wandb-api-key or set WANDB_API_KEY "
                    "(or WANDB_MODE=offline to log locally)."
                )
        extra = dict(wandb_kwargs or {})
        config = dict(init_hp or {})
        mutation = extra.pop("mutation_hyperparams", None)
        if mutation:
            config.update(dict(mutation))
        init_args: dict[str, Any] = {
            "project": extra.pop("project", project),
            "name": extra.pop("name", wandb_run_name(algo, env_name, timestamp)),
            "config": {**config, **dict(extra.pop("config", None) or {})},
        }
        init_args.update(extra.pop("addl_args", None) or {})
        init_args.update(extra)
        self.run: Any = wandb.init(**init_args)
        self.run.define_metric(GLOBAL_STEP_KEY)
        self.run.define_metric("*", step_metric=GLOBAL_STEP_KEY)

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if self.run is None:
            raise RuntimeError("WandbLogger is closed")
        payload = dict(metrics)
        global_step = self.step_of(metrics, step)
        if global_step is not None:
            payload[GLOBAL_STEP_KEY] = global_step
        self.run.log(payload)

    def close(self) -> None:
        """Finish the run; its files are complete on disk when this returns."""
        if self.run is None:
            return
        import wandb

        self.run.finish()
        self.run = None
        # finish() can return before W&B's service has written the run file (seen in
        # offline mode); shutting the service down waits for it. Skipped if the caller
        # has another run open in this process.
        if wandb.run is None:
            wandb.teardown()
