"""``arena-server``: run the server, mint access tokens, approve device logins.

    arena-server serve --host 127.0.0.1 --port 8080 --data-dir DIR [--slots K]
                       [--allow-custom-code] [--job-command CMD] [limits ...]
    arena-server tokens create --data-dir DIR --user NAME [--admin]
    arena-server tokens list --data-dir DIR [--user NAME] [--revoked]
    arena-server tokens revoke --data-dir DIR (TOKEN_ID ... | --user NAME)
    arena-server device approve --data-dir DIR --user NAME CODE

``tokens create`` prints the new token alone on stdout; ``tokens list`` prints one line per
token (id, user, creation time, state), never a secret. Exit status: 0 ok, 1 a runtime
problem (data folder unusable, port taken, unknown code), 2 a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agilerl.arena.server.config import ServerConfig
from agilerl.version import version_line

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from agilerl.arena.server.store import Store

#: what a numeric flag's argparse type returns (an int or a float).
N = TypeVar("N", int, float)

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _number(cast: Callable[[str], N], what: str, low: float,
            high: float = float("inf")) -> Callable[[str], N]:
    """An argparse type: ``cast`` the text and keep it in ``[low, high]``."""

    def parse(text: str) -> N:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if not low <= value <= high:
            bounds = f"at least {low:g}" if high == float("inf") else f"{low:g}-{high:g}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return value

    return parse


_positive = _number(int, "an integer", 1)
_port = _number(int, "a port number", 0, 65535)
_seconds = _number(float, "seconds", 0)


def _command(text: str) -> list[str]:
    try:
        parts = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"cannot parse command: {exc}") from None
    if not parts:
        raise argparse.ArgumentTypeError("the job command is empty")
    return parts


def _env_var(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not name.isidentifier():
        raise argparse.ArgumentTypeError(f"'{name}' is not a variable name")
    if not sep:
        if name not in os.environ:
            raise argparse.ArgumentTypeError(f"{name} is not set here; write {name}=VALUE")
        value = os.environ[name]
    return name, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arena-server",
                                     description="Self-hosted Arena-compatible training server")
    parser.add_argument("--version", action="version", version=version_line("arena-server"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the HTTP server and its job scheduler")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    serve.add_argument("--port", type=_port, default=8080, help="port (0 = any free port)")
    serve.add_argument("--data-dir", type=Path, required=True, help="database, secrets, runs")
    serve.add_argument("--slots", type=_positive, default=1, help="jobs run at once")
    serve.add_argument("--allow-custom-code", action="store_true",
                       help="accept manifests that import user code (entrypoint, wrappers, ...)"
                       " and environment uploads")
    serve.add_argument("--job-command", type=_command, default=None,
                       help="worker command (default: '<python> -m agilerl.train')")
    serve.add_argument("--job-env", type=_env_var, action="append", default=[],
                       metavar="NAME[=VALUE]",
                       help="also give jobs this variable (its value here when none is given);"
                       " repeatable. Jobs otherwise see only PATH, LANG, LC_*, ... and their own")
    serve.add_argument("--no-job-sandbox", action="store_true",
                       help="do not confine jobs with Landlock (they can then read the data"
                       " folder, signing secret included)")
    serve.add_argument("--job-memory-mb", type=_positive, default=None, metavar="MIB",
                       help="memory all processes of one job may use together (default: no"
                       " cap); past it the job is ended with a 'memory limit hit' error")
    serve.add_argument("--job-max-processes", type=_positive, default=1024,
                       help="processes one job may run at once")
    serve.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="run each job's population on this Ray cluster (host:port, ray://"
                       "host:port or auto), on num_nodes of its nodes; resources are its nodes")
    serve.add_argument("--stop-grace", type=_seconds, default=10.0,
                       help="seconds between SIGTERM and SIGKILL on stop")
    serve.add_argument("--max-body-bytes", type=_positive, default=1 << 20)
    serve.add_argument("--max-upload-bytes", type=_positive, default=16 << 20)
    serve.add_argument("--max-total-steps", type=_positive, default=50_000_000,
                       help="cap on the env steps of one job: pop_size x max_steps, plus"
                       " evaluation (generations x eval_loop x eval_steps x num_envs per agent)")
    serve.add_argument("--max-envs", type=_positive, default=256,
                       help="cap on environment.num_envs per job")
    serve.add_argument("--max-active-jobs", type=_positive, default=20,
                       help="queued or running jobs per user")
    serve.add_argument("--max-restarts", type=_number(int, "an integer", 0), default=2,
                       help="times a run cut off by a server restart is re-queued")
    serve.add_argument("--public-url", default="",
                       help="URL users reach this server at (for device-login links)")
    serve.add_argument("--log-level", default="info",
                       choices=["critical", "error", "warning", "info", "debug"])
    _add_custom_env_options(serve)
    _add_limit_options(serve)

    tokens = sub.add_parser("tokens", help="personal access tokens")
    tsub = tokens.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = tsub.add_parser("create", help="create a user if needed and print a new token")
    create.add_argument("--data-dir", type=Path, required=True)
    create.add_argument("--user", required=True)
    create.add_argument("--admin", action="store_true", help="may mint tokens for others")
    listing = tsub.add_parser("list", help="list personal access tokens (ids, never secrets)")
    listing.add_argument("--data-dir", type=Path, required=True)
    listing.add_argument("--user", default=None, help="only this user's tokens")
    listing.add_argument("--revoked", action="store_true", help="include revoked tokens")
    revoke = tsub.add_parser("revoke", help="revoke tokens by id, or all of a user's")
    revoke.add_argument("--data-dir", type=Path, required=True)
    revoke.add_argument("token_ids", nargs="*", metavar="TOKEN_ID",
                        help="an id from 'tokens list', or the whole token")
    revoke.add_argument("--user", default=None,
                        help="revoke every token and login (refresh token) of this user")

    device = sub.add_parser("device", help="device logins")
    dsub = device.add_subparsers(dest="action", required=True, metavar="ACTION")
    approve = dsub.add_parser("approve", help="approve a pending device login")
    approve.add_argument("--data-dir", type=Path, required=True)
    approve.add_argument("--user", required=True)
    approve.add_argument("user_code")
    return parser


#: ``serve`` flag -> (ServerConfig field, scale from the flag's unit, argparse type).
_CUSTOM_ENV_FLAGS: dict[str, tuple[str, int, Callable[[str], float]]] = {
    "--env-install-timeout": ("env_install_timeout_s", 1, _seconds),
    "--env-max-venv-mb": ("env_max_venv_bytes", 1 << 20, _positive),
    "--env-max-source-mb": ("env_max_source_bytes", 1 << 20, _positive),
    "--env-check-cpu": ("env_check_cpu_s", 1, _positive),
    "--env-check-memory-mb": ("env_check_memory_bytes", 1 << 20, _positive),
    "--env-check-wall": ("env_check_wall_s", 1, _seconds),
}


def _add_custom_env_options(serve: argparse.ArgumentParser) -> None:
    """Limits on uploaded environments (used only with --allow-custom-code); defaults are
    :class:`ServerConfig`'s."""
    group = serve.add_argument_group("uploaded environments (with --allow-custom-code)")
    defaults = ServerConfig.__dataclass_fields__
    texts = {"--env-install-timeout": "seconds pip may take to install requirements",
             "--env-max-venv-mb": "largest an environment's virtual environment may grow",
             "--env-max-source-mb": "largest an uploaded source archive may unpack to",
             "--env-check-cpu": "CPU seconds of one validation or profiling run",
             "--env-check-memory-mb": "memory (address space) of one validation or profiling",
             "--env-check-wall": "wall-clock seconds of one validation or profiling run"}
    for flag, (name, scale, kind) in _CUSTOM_ENV_FLAGS.items():
        default = defaults[name].default
        shown = default // scale if isinstance(default, int) else default
        group.add_argument(flag, type=kind, default=None, metavar="N",
                           help=f"{texts[flag]} (default {shown})")


def _custom_env_config(args: argparse.Namespace) -> dict[str, Any]:
    found = {}
    for flag, (name, scale, _) in _CUSTOM_ENV_FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            found[name] = value * scale
    return found


#: ``serve`` flag -> (ServerConfig field, scale from the flag's unit, argparse type, help):
#: what one job may hold and one user's disk quota (defaults are ServerConfig's).
_LIMIT_FLAGS: dict[str, tuple[str, int, Callable[[str], float], str]] = {
    "--max-checkpoints": ("max_checkpoints_per_job", 1, _positive,
                          "checkpoints one job may save"),
    "--max-epochs": ("max_epochs", 1, _positive,
                     "largest algorithm.update_epochs / training.num_epochs"),
    "--max-network-width": ("max_network_width", 1, _positive, "widest network layer"),
    "--max-network-depth": ("max_network_depth", 1, _positive, "most layers of one network"),
    "--max-network-params": ("max_network_params", 1, _positive,
                             "most hidden weights of a job's whole population"),
    "--user-disk-quota-mb": ("user_disk_quota_bytes", 1 << 20,
                             _number(int, "an integer", 0),
                             "disk one user's experiments, environments and datasets may"
                             " take (0: no quota)"),
    "--quota-check-interval": ("quota_check_interval_s", 1, _number(float, "seconds", 0.1),
                               "seconds between disk measurements of running jobs' users"),
}


def _add_limit_options(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("job budget and disk quota")
    defaults = ServerConfig.__dataclass_fields__
    for flag, (name, scale, kind, text) in _LIMIT_FLAGS.items():
        default = defaults[name].default
        shown = default // scale if isinstance(default, int) else default
        group.add_argument(flag, type=kind, default=None, metavar="N",
                           help=f"{text} (default {shown})")


def _limit_config(args: argparse.Namespace) -> dict[str, Any]:
    found = {}
    for flag, (name, scale, _, _) in _LIMIT_FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            found[name] = value * scale
    return found


def _fail(message: str) -> int:
    print(f"arena-server: error: {message}", file=sys.stderr)
    return 1


def _config(args: argparse.Namespace) -> ServerConfig:
    cfg = ServerConfig(
        data_dir=args.data_dir, slots=args.slots, allow_custom_code=args.allow_custom_code,
        stop_grace_s=args.stop_grace, max_body_bytes=args.max_body_bytes,
        max_upload_bytes=args.max_upload_bytes, max_total_steps=args.max_total_steps,
        max_envs=args.max_envs,
        max_active_jobs_per_user=args.max_active_jobs, public_url=args.public_url,
        max_restarts=args.max_restarts, extra_env=dict(args.job_env),
        job_sandbox=not args.no_job_sandbox, ray_address=args.ray_address,
        job_memory_bytes=args.job_memory_mb << 20 if args.job_memory_mb else None,
        job_max_processes=args.job_max_processes,
        **_custom_env_config(args), **_limit_config(args),
    )
    if args.job_command:
        cfg.job_command = args.job_command
    return cfg


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket configured for low-latency request/response traffic."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this; without it a response written as headers then
    # body meets the client's delayed ACK and every request takes ~40 ms more.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _Stop(Exception):
    """SIGTERM arrived before uvicorn took over the stop signals."""


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def _uvicorn_server(app: FastAPI, log_level: str) -> uvicorn.Server:
    """A uvicorn server for which SIGINT/SIGTERM mean "shut down cleanly and exit 0".

    uvicorn re-raises a captured stop signal once it has shut down, so the process would die
    of it (exit -2/-15, or a KeyboardInterrupt traceback). A stop requested by the operator,
    Ctrl-C, systemd or Kubernetes is the normal way this server ends, so the signals are
    captured here and not re-raised; a second Ctrl-C still forces an immediate exit.
    """
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            stops = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server(uvicorn.Config(app, log_level=log_level, lifespan="on",
                                 access_log=log_level == "debug"))


def _say_how_jobs_are_confined(cfg: ServerConfig) -> None:
    from agilerl.arena.server.sandbox import landlock_abi

    if not cfg.job_sandbox:
        print("arena-server: warning: jobs are not sandboxed (--no-job-sandbox): they can read"
              f" {cfg.data_dir}, the signing secret included", file=sys.stderr)
    elif landlock_abi() < 1:
        print("arena-server: warning: this kernel has no Landlock, so jobs cannot be sandboxed:"
              f" they can read {cfg.data_dir}, the signing secret included; run the server as"
              " a dedicated account and enable --allow-custom-code only for trusted users",
              file=sys.stderr)
    else:
        print(f"arena-server: jobs are sandboxed (Landlock ABI {landlock_abi()}): no access to"
              " the data folder beyond their own experiment folder", file=sys.stderr)
    from agilerl.arena.server.containment import for_jobs, probe

    jobs, checks = for_jobs(on_ray_cluster=cfg.ray_address is not None), probe()
    said = [("job and check", jobs)] if jobs == checks else [("job", jobs), ("check", checks)]
    for who, tree in said:
        print(f"arena-server: {who} {tree.describe()}", file=sys.stderr)


def _serve(args: argparse.Namespace) -> int:
    """Run until stopped; SIGINT or SIGTERM at any point ends it with status 0."""
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        return _serve_until_stopped(args)
    except (KeyboardInterrupt, _Stop):
        print("arena-server: stopped", file=sys.stderr)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve_until_stopped(args: argparse.Namespace) -> int:
    from agilerl.arena.server.app import DataDirBusy, create_app
    from agilerl.arena.server.cluster import ClusterUnavailable
    from agilerl.arena.server.store import CorruptDatabase

    try:
        cfg = _config(args)
        app = create_app(cfg)
    except (DataDirBusy, ClusterUnavailable, CorruptDatabase) as exc:
        return _fail(str(exc))
    except (OSError, ValueError) as exc:
        return _fail(f"cannot use data folder {args.data_dir}: {exc}")
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    if args.host not in _LOOPBACK:
        print("arena-server: warning: listening beyond loopback without TLS; put an HTTPS"
              " proxy in front of it", file=sys.stderr)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"arena-server listening on http://{shown}:{port} (data: {cfg.data_dir})",
          file=sys.stderr, flush=True)
    _say_how_jobs_are_confined(cfg)
    if cfg.ray_address:
        print(f"arena-server: jobs run on the Ray cluster at {cfg.ray_address}",
              file=sys.stderr, flush=True)
    _uvicorn_server(app, args.log_level).run(sockets=[sock])
    print("arena-server: stopped", file=sys.stderr)
    return 0


def _tokens_create(args: argparse.Namespace) -> int:
    from agilerl.arena.server.auth import Authenticator
    from agilerl.arena.server.store import Store

    user = args.user.strip()
    if not user or any(c.isspace() for c in user):
        return _fail("--user must be a non-empty name without spaces")
    try:
        cfg = ServerConfig(data_dir=args.data_dir)
        cfg.ensure_dirs()
        store = Store(cfg.db_path)
        token = Authenticator(store, cfg).create_pat(user, admin=args.admin)
        store.close()
    except OSError as exc:
        return _fail(f"cannot use data folder {args.data_dir}: {exc}")
    print(token)
    return 0


@contextlib.contextmanager
def _existing_store(data_dir: Path) -> Iterator[Store]:
    """The server database under ``data_dir``; :class:`_NoDatabase` when there is none."""
    from agilerl.arena.server.store import Store

    cfg = ServerConfig(data_dir=data_dir)
    if not cfg.db_path.exists():
        raise _NoDatabase(f"{data_dir} holds no server database")
    store = Store(cfg.db_path)
    try:
        yield store
    finally:
        store.close()


class _NoDatabase(Exception):
    pass


def _tokens_list(args: argparse.Namespace) -> int:
    with _existing_store(args.data_dir) as store:
        rows = store.tokens(args.user, revoked=args.revoked)
    for row in rows:
        state = "revoked" if row["revoked"] else "active"
        print(f"{row['token_id']}  {row['user']}  {row['created_at']}  {state}")
    if not rows:
        print("no tokens", file=sys.stderr)
    return 0


def _token_id(text: str) -> str:
    """The id of ``arena_pat_<id>_<secret>``, or ``text`` itself."""
    from agilerl.arena.server.auth import PAT_PREFIX

    if text.startswith(PAT_PREFIX):
        return text[len(PAT_PREFIX):].split("_", 1)[0]
    return text


def _tokens_revoke(args: argparse.Namespace) -> int:
    if bool(args.token_ids) == bool(args.user):
        print("arena-server tokens revoke: error: give TOKEN_ID(s) or --user NAME",
              file=sys.stderr)
        return 2
    with _existing_store(args.data_dir) as store:
        if args.user:
            user = store.user_by_name(args.user)
            if user is None:
                return _fail(f"unknown user '{args.user}'")
            pats, refresh = store.revoke_user_tokens(user["id"])
            print(f"revoked {pats} token(s) and {refresh} login(s) of {args.user}",
                  file=sys.stderr)
            return 0
        unknown = [t for t in args.token_ids if not store.revoke_token(_token_id(t))]
    for text in args.token_ids:
        if text not in unknown:
            print(f"revoked {_token_id(text)}", file=sys.stderr)
    if unknown:
        return _fail("no active token with id " + ", ".join(_token_id(t) for t in unknown))
    return 0


def _device_approve(args: argparse.Namespace) -> int:
    from agilerl.arena.server.auth import Authenticator, User
    from agilerl.arena.server.errors import ApiError
    from agilerl.arena.server.store import Store

    cfg = ServerConfig(data_dir=args.data_dir)
    if not cfg.db_path.exists():
        return _fail(f"{args.data_dir} holds no server database")
    store = Store(cfg.db_path)
    try:
        row = store.user_by_name(args.user)
        if row is None:
            return _fail(f"unknown user '{args.user}' (create one with 'tokens create')")
        user = User(id=row["id"], name=row["name"], is_admin=bool(row["is_admin"]))
        Authenticator(store, cfg).approve_device(args.user_code, user)
    except ApiError as exc:
        return _fail(exc.message)
    finally:
        store.close()
    print(f"approved device login {args.user_code.upper()} for {args.user}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    actions = {("tokens", "create"): _tokens_create, ("tokens", "list"): _tokens_list,
               ("tokens", "revoke"): _tokens_revoke, ("device", "approve"): _device_approve}
    from agilerl.arena.server.store import CorruptDatabase

    try:
        return actions[(args.command, args.action)](args)
    except (_NoDatabase, CorruptDatabase) as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
