"""How the Ray backend's driver joins a cluster and waits on it: the connection, the
reserved placement group, and the recovery timeout that bounds every wait after a loss."""

from __future__ import annotations

import copy
import logging
import os
from typing import TYPE_CHECKING, TypeVar

import ray

from agilerl.core.errors import TrainingSetupError
from agilerl.population.ray_cluster import (
    NAMESPACE,
    PLACEMENT_GROUP_ENV,
    RECOVERY_TIMEOUT_ENV,
    RECOVERY_TIMEOUT_S,
    unreachable,
)

if TYPE_CHECKING:  # pragma: no cover
    from ray.util.placement_group import PlacementGroup

T = TypeVar("T")


def fetch(ref: ray.ObjectRef[T], timeout: float | None = None) -> T:
    """An object of the object store as this process's own copy: ``ray.get`` maps arrays
    in place, and they would change under us once the store frees or reuses them."""
    return copy.deepcopy(ray.get(ref, timeout=timeout))


def recovery_timeout() -> float:
    """``AGILERL_RAY_RECOVERY_TIMEOUT`` (seconds, > 0), else the default."""
    raw = os.environ.get(RECOVERY_TIMEOUT_ENV, "").strip()
    if not raw:
        return RECOVERY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise TrainingSetupError(f"{RECOVERY_TIMEOUT_ENV} = {raw!r}: expected a number of "
                                 "seconds greater than 0")
    return value


def connect(address: str | None) -> bool:
    """Join the cluster at ``address`` unless this process already is a Ray driver; True
    when this call connected (and so the backend disconnects when it closes)."""
    if ray.is_initialized():
        return False
    where = f"--ray-address / training.ray_address {address!r}"
    problem = unreachable(address)
    if problem is not None:
        raise TrainingSetupError(f"{where}: no Ray cluster answers there ({problem})")
    try:
        ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR,
                 log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise TrainingSetupError(f"{where}: cannot reach a Ray cluster there ({exc})") from None
    return True


def named_placement_group() -> PlacementGroup | None:
    """The placement group named by ``AGILERL_RAY_PLACEMENT_GROUP``, ready, or None."""
    name = os.environ.get(PLACEMENT_GROUP_ENV)
    if not name:
        return None
    from ray.util import get_placement_group

    try:
        group = get_placement_group(name)
    except ValueError:
        raise TrainingSetupError(f"{PLACEMENT_GROUP_ENV} = {name!r}: no such placement group "
                                 f"in Ray namespace {NAMESPACE!r}") from None
    ray.get(group.ready(), timeout=300)
    return group


class suppress_ray_errors:  # noqa: N801 - used like contextlib.suppress
    """Ignore Ray's errors (and a handle Ray no longer knows) in a best-effort cleanup."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> bool:
        return exc_type is not None and issubclass(exc_type, ray.exceptions.RayError | ValueError)
