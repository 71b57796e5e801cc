"""The Ray cluster a server started with ``--ray-address`` runs its jobs on.

The server connects to the cluster once, as a Ray driver that starts nothing, and asks it
for its alive nodes: they become the resource tiers (one per node shape: CPUs, GPUs, GPU
type, memory) and bound ``num_nodes`` at submission. Each job then runs its population on
the cluster (``agilerl.train ... --backend ray --ray-address ADDR --ray-nodes N``), whose
driver reserves a placement group of ``N`` bundles on ``N`` distinct nodes.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypedDict

from agilerl.population.ray_cluster import NAMESPACE, PLACEMENT_GROUP_ENV, unreachable

log = logging.getLogger(__name__)


class ClusterUnavailable(RuntimeError):
    """The Ray cluster cannot be reached (or Ray is not installed)."""


@dataclass(frozen=True)
class NodeShape:
    """What one node offers; nodes of one shape form one resource tier."""

    cpus: int
    gpus: int
    gpu_type: str | None
    ram_gb: float

    @property
    def tier_id(self) -> str:
        gpu = f"{self.gpus}x{(self.gpu_type or 'gpu').lower()}-" if self.gpus else ""
        return f"ray-{gpu}{self.cpus}cpu"


class Tier(TypedDict):
    """One resource tier of :meth:`RayCluster.tiers` (spec: ``resources/list``)."""

    name: str
    num_gpus: int
    gpu_type: str | None
    num_cpus: int
    ram_gb: float
    price_per_node_hour: int
    nodes: int


def node_shape(resources: dict[str, float]) -> NodeShape:
    """The shape of a node from its Ray resources (``CPU``, ``GPU``, ``memory``,
    ``accelerator_type:<T>``)."""
    types = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
    return NodeShape(cpus=int(resources.get("CPU", 0)), gpus=int(resources.get("GPU", 0)),
                     gpu_type=types[0] if types else None,
                     ram_gb=round(float(resources.get("memory", 0.0)) / 2**30, 1))


class RayCluster:
    """A connection to the cluster at ``address`` (``host:port``, ``ray://...`` or ``auto``)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._lock = threading.Lock()
        self._ray: ModuleType | None = None  # the ray module, once connected

    def connect(self) -> None:
        """Join the cluster as a driver; raises :class:`ClusterUnavailable` with the reason."""
        try:
            import ray
        except ImportError:
            raise ClusterUnavailable(
                "--ray-address needs Ray on the server: pip install 'agilerl[ray]'") from None
        with self._lock:
            if self._ray is not None:
                return
            problem = unreachable(self.address)
            if problem is not None:
                raise ClusterUnavailable(
                    f"cannot reach the Ray cluster at {self.address}: {problem}")
            try:
                ray.init(address=self.address, namespace=NAMESPACE,
                         logging_level=logging.ERROR, log_to_driver=False,
                         configure_logging=False)
            except Exception as exc:  # ConnectionError, ValueError, grpc errors, ...
                raise ClusterUnavailable(
                    f"cannot reach the Ray cluster at {self.address}: {exc}") from None
            self._ray = ray

    def close(self) -> None:
        with self._lock:
            if self._ray is not None:
                self._ray.shutdown()
                self._ray = None

    def nodes(self) -> list[NodeShape]:
        """The shapes of the cluster's alive nodes, one entry per node."""
        self.connect()
        assert self._ray is not None  # connect() set it, or raised
        return [node_shape(dict(n.get("Resources") or {}))
                for n in self._ray.nodes() if n.get("Alive")]

    def tiers(self) -> dict[str, Tier]:
        """Resource tiers (spec: ``resources/list``), one per kind of node (CPUs, GPUs, GPU
        type), most GPUs then most CPUs first; ``ram_gb`` is the smallest of its nodes."""
        groups: dict[str, list[NodeShape]] = {}
        for shape in self.nodes():
            groups.setdefault(shape.tier_id, []).append(shape)
        tiers: dict[str, Tier] = {}
        for key, shapes in sorted(groups.items(), key=lambda kv: (-kv[1][0].gpus,
                                                                   -kv[1][0].cpus)):
            shape, count = shapes[0], len(shapes)
            gpus = f", {shape.gpus} {shape.gpu_type or 'GPU'}" if shape.gpus else ""
            tiers[key] = {
                "name": f"Ray node: {shape.cpus} CPUs{gpus} ({count} node"
                        f"{'s' if count != 1 else ''} at {self.address})",
                "num_gpus": shape.gpus, "gpu_type": shape.gpu_type, "num_cpus": shape.cpus,
                "ram_gb": min(s.ram_gb for s in shapes), "price_per_node_hour": 0,
                "nodes": count,
            }
        return tiers

    def reserve(self, name: str, nodes: int) -> dict[str, str]:
        """Reserve one CPU on each of ``nodes`` distinct nodes for a job (a placement group
        named ``name``, removed by :meth:`release` or when this server goes); returns the
        environment variables that hand it to the job's driver."""
        self.connect()
        from ray.util import placement_group

        try:
            placement_group([{"CPU": 1}] * nodes, strategy="STRICT_SPREAD", name=name)
        except Exception as exc:  # the cluster went away, refused the request, ...
            raise ClusterUnavailable(f"could not reserve {nodes} node(s) on the Ray cluster at "
                                     f"{self.address}: {type(exc).__name__}: {exc}") from None
        return {PLACEMENT_GROUP_ENV: name}

    def release(self, name: str) -> None:
        """Give back a job's reservation (nothing if there is none)."""
        if self._ray is None:
            return
        from ray.util import get_placement_group, remove_placement_group

        try:
            remove_placement_group(get_placement_group(name))
        except Exception:  # already gone, or the cluster is unreachable
            log.warning("could not remove Ray placement group %s", name, exc_info=True)

    def session_dir(self) -> Path | None:
        """The cluster's session folder on this machine (a job's driver writes its logs
        there), or None when the server reaches the cluster through the Ray client."""
        self.connect()
        if self._ray is None:  # closed meanwhile
            return None
        try:
            node = self._ray._private.worker.global_worker.node
        except AttributeError:
            return None
        path = getattr(node, "get_session_dir_path", lambda: None)()
        return Path(path) if path else None
