"""Weights & Biases run per training run (``--wb``); offline mode needs no account."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agilerl.core.value_types import Options
from agilerl.logging.base import GLOBAL_STEP_KEY, MetricsLogger, run_timestamp

if TYPE_CHECKING:
    from wandb.sdk.wandb_run import Run

__all__ = [
    "WANDB_PROJECT",
    "WANDB_PROJECT_MULTI_AGENT",
    "WandbLogger",
    "WandbSetupError",
    "wandb_run_name",
]

WANDB_PROJECT = "AgileRL"
WANDB_PROJECT_MULTI_AGENT = "AgileRLMultiAgent"
_OFFLINE_MODES = {"offline", "dryrun", "disabled"}


_HOW_TO = ("pass --wandb-api-key (wandb_api_key=), set WANDB_API_KEY, run `wandb login` "
           "once, or log locally without an account with WANDB_MODE=offline")


class WandbSetupError(RuntimeError):
    """W&B logging cannot start (no API key, or ``wandb.init`` failed); says what to do."""


def _stored_credentials() -> bool:
    """True when ``wandb login`` stored a key (in the netrc file W&B reads) for the host
    W&B will use; read here so W&B is never left to prompt for one."""
    import netrc
    from pathlib import Path
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        entry = netrc.netrc(str(path)).authenticators(host or "api.wandb.ai")
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


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
        wandb_api_key: API key; falls back to ``WANDB_API_KEY``, then to a key stored by
            ``wandb login``. Not needed when ``WANDB_MODE`` is ``offline`` (or
            ``disabled``); online without any key raises :class:`WandbSetupError` at once
            (W&B is never left to wait on its interactive prompt).
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
        init_hp: Mapping[str, object] | None = None,
        wandb_api_key: str | None = None,
        wandb_kwargs: Options | None = None,
        project: str = WANDB_PROJECT,
        timestamp: str | None = None,
    ):
        try:
            import wandb
        except ImportError:
            raise WandbSetupError("W&B logging (--wb) needs the 'wandb' package: "
                                  "pip install wandb") from None

        mode = os.environ.get("WANDB_MODE", "").lower()
        key = wandb_api_key or os.environ.get("WANDB_API_KEY")
        if mode not in _OFFLINE_MODES:
            if not key and not _stored_credentials():
                raise WandbSetupError(f"W&B logging (--wb) needs an API key: {_HOW_TO}.")
            try:
                if key:
                    wandb.login(key=key, relogin=True)
            except Exception as exc:
                raise WandbSetupError(
                    f"W&B rejected the API key ({type(exc).__name__}: {exc}); {_HOW_TO}."
                ) from None
        # The user's wandb.init arguments, a few picked apart here; W&B checks the values.
        extra: dict[str, Any] = dict(wandb_kwargs or {})
        config = dict(init_hp or {})
        mutation = extra.pop("mutation_hyperparams", None)
        if mutation:
            config.update(dict(mutation))
        init_args: dict[str, Any] = {  # keyword arguments of wandb.init, of many types
            "project": extra.pop("project", project),
            "name": extra.pop("name", wandb_run_name(algo, env_name, timestamp)),
            "config": {**config, **dict(extra.pop("config", None) or {})},
        }
        init_args.update(extra.pop("addl_args", None) or {})
        init_args.update(extra)
        try:
            self.run: Run | None = wandb.init(**init_args)
        except Exception as exc:  # no network, a refused key, a bad init argument
            raise WandbSetupError(
                f"W&B logging could not start ({type(exc).__name__}: {exc}); {_HOW_TO}."
            ) from None
        self.run.define_metric(GLOBAL_STEP_KEY)
        self.run.define_metric("*", step_metric=GLOBAL_STEP_KEY)

    def log(self, metrics: Mapping[str, object], step: int | None = None) -> None:
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
