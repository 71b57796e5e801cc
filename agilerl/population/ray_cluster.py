"""A throwaway Ray cluster on this machine: a head node plus worker nodes, started with the
``ray`` CLI exactly as on real machines, for tests, benchmarks and trying the Ray backend.

    with local_ray_cluster(Path("/tmp/rc"), nodes=2, cpus_per_node=1) as cluster:
        agilerl train manifest.yaml --backend ray --ray-address cluster.address

Every node is one ``ray start --block`` process in its own process group, bound to
127.0.0.1, with ``HOME``, ``TMPDIR`` and Ray's temp folder under ``root``. On exit each node
is sent SIGTERM (``--block`` then stops what it started), and whatever is left of its group,
or of any process that still names the cluster's temp folder, is killed by process id; no
other Ray process on the machine is touched (``ray stop`` would end every one of them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Ray namespace of agilerl's drivers (named placement groups are looked up there).
NAMESPACE = "agilerl"
#: Names a placement group reserved for a run by someone else (the Arena server reserves
#: one of ``num_nodes`` bundles on distinct nodes per job): one actor per bundle.
PLACEMENT_GROUP_ENV = "AGILERL_RAY_PLACEMENT_GROUP"
#: Seconds a Ray driver waits, once a member's actor is lost (its process or node died),
#: for a new actor to be placed or for a member's state to arrive, before it gives up on
#: that actor (default :data:`RECOVERY_TIMEOUT_S`).
RECOVERY_TIMEOUT_ENV = "AGILERL_RAY_RECOVERY_TIMEOUT"
RECOVERY_TIMEOUT_S = 30.0

STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
#: Object store per node: small, the states of a few MLPs fit many times over.
OBJECT_STORE_BYTES = 100 * 1024 * 1024


class ClusterError(RuntimeError):
    """A node of the local cluster did not start."""


def unreachable(address: str | None, timeout: float = 5.0) -> str | None:
    """Why nothing answers at a ``host:port`` or ``ray://host:port`` Ray address (None when
    something listens there, or for ``auto``/None, which Ray resolves itself). ``ray.init``
    would otherwise retry an unreachable address for minutes."""
    if not address or address == "auto":
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return "expected host:port, ray://host:port or auto"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


@dataclass
class LocalRayCluster:
    """A running local cluster: ``address`` (``host:port`` of the head's GCS) to give
    ``--ray-address``, ``client_address`` (``ray://...``) for the Ray client."""

    root: Path
    address: str
    client_address: str
    env: dict[str, str]
    nodes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def temp_dir(self) -> Path:
        return self.root / "ray"

    def add_node(self, cpus: int = 1) -> None:
        """Start one more worker node and wait until the cluster counts it."""
        before = len(self.nodes)
        self.nodes.append(_start_node(self, ["--address", self.address], cpus))
        _wait_for_nodes(self, before + 1)

    def kill(self, node: int, process: str) -> list[int]:
        """SIGKILL the processes of node ``node`` (0: the head) whose command line or title
        contains ``process`` (``raylet``, ``ray::DashboardAgent``), as a machine fault would;
        their process ids."""
        group = self.nodes[node].pid
        killed = []
        for pid in _processes_naming(process):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == group:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        return killed

    def stop(self) -> None:
        """Stop every node (worker nodes first); kill what does not stop by process id."""
        for proc in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT_S)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.nodes.clear()
        for pid in _processes_naming(str(self.temp_dir)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_command() -> list[str]:
    script = Path(sys.executable).with_name("ray")
    if script.exists():
        return [str(script)]
    found = shutil.which("ray")
    if found is None:
        raise ClusterError("the `ray` command is not installed: pip install 'agilerl[ray]'")
    return [found]


def _start_node(cluster: LocalRayCluster, role: list[str], cpus: int) -> subprocess.Popen[bytes]:
    """One ``ray start --block`` in its own process group (its log: ``<root>/node-N.log``)."""
    cmd = [*_ray_command(), "start", "--block", *role,
           "--node-ip-address", "127.0.0.1", f"--num-cpus={cpus}", "--num-gpus=0",
           f"--object-store-memory={OBJECT_STORE_BYTES}",
           "--disable-usage-stats", f"--temp-dir={cluster.temp_dir}",
           f"--dashboard-agent-listen-port={_free_port()}",
           f"--dashboard-agent-grpc-port={_free_port()}",
           f"--runtime-env-agent-port={_free_port()}",
           f"--metrics-export-port={_free_port()}"]
    log = (cluster.root / f"node-{len(cluster.nodes)}.log").open("wb")
    with log:
        return subprocess.Popen(cmd, env=cluster.env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=cluster.root)


_STARTED = b"Ray runtime started"


def _wait_for_nodes(cluster: LocalRayCluster, count: int) -> None:
    """Wait until the first ``count`` nodes have said that their runtime started."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        started = 0
        for i, proc in enumerate(cluster.nodes[:count]):
            log = cluster.root / f"node-{i}.log"
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise ClusterError(f"ray node {i} exited with code {proc.returncode}:\n{tail}")
            started += _STARTED in log.read_bytes()
        if started >= count:
            return
        time.sleep(0.5)
    raise ClusterError(f"the local Ray cluster did not reach {count} nodes in "
                       f"{STARTUP_TIMEOUT_S:.0f} s (logs under {cluster.root})")


def _processes_naming(text: str) -> list[int]:
    """Process ids whose command line contains ``text`` (this cluster's temp folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def local_ray_cluster(root: Path | None = None, *, nodes: int = 1, cpus_per_node: int = 1,
                      head_cpus: int | None = None) -> Iterator[LocalRayCluster]:
    """Start a head node and ``nodes - 1`` worker nodes; stop them all on exit. The head
    has ``head_cpus`` CPUs (default ``cpus_per_node``; 0 keeps every actor off it).

    ``root`` must be short (Ray's socket paths live under it and a Unix socket path holds
    at most 107 bytes); by default a fresh folder under the system temp folder is used and
    removed afterwards.
    """
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="rc")) if root is None else Path(root)
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), RAY_USAGE_STATS_ENABLED="0")
    port, client_port = _free_port(), _free_port()
    cluster = LocalRayCluster(root=root, address=f"127.0.0.1:{port}",
                              client_address=f"ray://127.0.0.1:{client_port}", env=env)
    try:
        cluster.nodes.append(_start_node(
            cluster, ["--head", f"--port={port}", f"--ray-client-server-port={client_port}",
                      "--include-dashboard=false"],
            cpus_per_node if head_cpus is None else head_cpus))
        _wait_for_nodes(cluster, 1)
        for _ in range(nodes - 1):
            cluster.add_node(cpus_per_node)
        yield cluster
    finally:
        cluster.stop()
        if own:
            shutil.rmtree(root, ignore_errors=True)
