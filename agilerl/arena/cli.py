"""The ``arena`` command: talk to an Arena training service from a shell.

Exit status: 0 on success (and for a declined confirmation), 1 when the request is
refused or fails (a bad manifest, an error from the server, a network failure), 2 for
a usage error. Errors are one readable message on stderr, never a traceback.
``--json`` (before or after the command) prints machine-readable answers on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from agilerl.version import version_line

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json",
        dest="json_out",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print machine-readable JSON on stdout",
    )
    return common


class _Builder:
    """Adds ``group command`` parsers bound to handlers in :mod:`agilerl.arena.commands`."""

    def __init__(self, root: argparse.ArgumentParser) -> None:
        self._groups = root.add_subparsers(dest="group", metavar="COMMAND")
        self._common = _common()

    def top(self, name: str, handler: str, help_text: str) -> argparse.ArgumentParser:
        parser = self._groups.add_parser(
            name, help=help_text, parents=[self._common], description=help_text
        )
        parser.set_defaults(handler=handler)
        return parser

    def group(self, name: str, help_text: str) -> Callable[..., argparse.ArgumentParser]:
        parser = self._groups.add_parser(name, help=help_text, description=help_text)
        commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

        def add(command: str, handler: str, help_text: str) -> argparse.ArgumentParser:
            sub = commands.add_parser(
                command, help=help_text, parents=[self._common], description=help_text
            )
            sub.set_defaults(handler=handler)
            return sub

        return add


def build_parser() -> argparse.ArgumentParser:
    """The full ``arena`` argument parser."""
    root = argparse.ArgumentParser(
        prog="arena",
        description="Submit and follow AgileRL training jobs on an Arena server "
        "(the hosted service, or your own: set ARENA_BASE_URL).",
        parents=[_common()],
    )
    root.add_argument("--version", action="version", version=version_line("arena"))
    root.add_argument(
        "--api-key", help="API key to use (default: ARENA_API_KEY, then the stored login)"
    )
    root.add_argument("--base-url", help="API server (ARENA_BASE_URL wins when set)")
    root.add_argument("--keycloak-url", help="auth server (ARENA_KEYCLOAK_URL wins when set)")
    root.add_argument("--realm", help="auth realm (default arena)")
    root.add_argument("--client-id", help="OAuth client id (default arena-cli)")
    root.add_argument("--request-timeout", type=_positive_int, default=30, metavar="SECONDS")
    root.add_argument("--upload-timeout", type=_positive_int, default=300, metavar="SECONDS")
    build = _Builder(root)
    _add_account(build)
    _add_projects(build)
    _add_environments(build)
    _add_datasets(build)
    _add_experiments(build)
    return root


def _add_account(build: _Builder) -> None:
    login = build.top("login", "login", "sign in (device login in the browser, or an API key)")
    login.add_argument(
        "--api-key",
        dest="login_api_key",
        metavar="KEY",
        help="check KEY with the server and store it ('-' reads it from stdin)",
    )
    login.add_argument("--force", action="store_true", help="sign in again even if signed in")
    login.add_argument("--timeout", type=_positive_int, default=300, metavar="SECONDS")
    login.add_argument("--no-browser", action="store_true", help="only print the address")
    build.top("logout", "logout", "forget the stored login")
    user = build.group("user", "the signed-in user")
    user("profile", "user_profile", "show the signed-in user")
    user("credits", "user_credits", "show remaining credits")
    resources = build.group("resources", "compute resources")
    resources("list", "resources_list", "list the resource tiers jobs can use")


def _add_projects(build: _Builder) -> None:
    projects = build.group("projects", "projects (groups of experiments)")
    projects("list", "projects_list", "list projects")
    create = projects("create", "projects_create", "create a project")
    create.add_argument("name")
    create.add_argument("--description")
    create.add_argument("--llm-based", action="store_true", help="an LLM fine-tuning project")
    delete = projects("delete", "projects_delete", "delete a project")
    delete.add_argument("name")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    default = projects("set-default", "projects_set_default", "use NAME when none is given")
    default.add_argument("name")
    projects("get-default", "projects_get_default", "show the default project")


def _add_environments(build: _Builder) -> None:
    env = build.group("env", "environments registered on the server")
    listing = env("list", "env_list", "list your environments (uploaded with 'env validate')")
    listing.add_argument("--name", help="only names containing this text")
    listing.add_argument(
        "--include-arena",
        action="store_true",
        help="also list the built-in Gymnasium/PettingZoo environments Arena provides",
    )
    for command, handler, text in (
        ("exists", "env_exists", "say whether an environment (version) exists"),
        ("entrypoints", "env_entrypoints", "list the entry points found in its source"),
        ("profile", "env_profile", "measure an environment's speed and footprint"),
    ):
        sub = env(command, handler, text)
        sub.add_argument("name")
        sub.add_argument("--version")
    validate = env("validate", "env_validate", "validate an environment (uploading --source)")
    validate.add_argument("name")
    validate.add_argument("--version")
    validate.add_argument("--source", help="folder, file or .tar.gz to upload and register")
    validate.add_argument("--env-config", help="YAML/JSON constructor arguments")
    validate.add_argument("--requirements", help="requirements.txt to install first")
    validate.add_argument("--entrypoint", help="module:Class when there are several")
    validate.add_argument("--description")
    validate.add_argument("--multi-agent", action="store_true")
    validate.add_argument("--language-based", action="store_true")
    validate.add_argument("--do-rollouts", action="store_true", help="also run random episodes")
    delete = env("delete", "env_delete", "delete an environment version (or all versions)")
    delete.add_argument("name")
    delete.add_argument("--version")
    delete.add_argument("--yes", action="store_true")
    duplicate = env("duplicate", "env_duplicate", "copy a version under a new version name")
    duplicate.add_argument("name")
    duplicate.add_argument("new_version", metavar="NEW_VERSION")
    duplicate.add_argument("--version", help="version to copy (default: the latest)")


def _add_datasets(build: _Builder) -> None:
    datasets = build.group("datasets", "datasets for LLM fine-tuning")
    listing = datasets("list", "datasets_list", "list your datasets")
    listing.add_argument("--name", help="only names containing this text")
    listing.add_argument("--search", help="search the Hugging Face Hub (hosted service)")
    exists = datasets("exists", "datasets_exists", "say whether a dataset exists")
    exists.add_argument("name")
    create = datasets("create", "datasets_create", "upload a CSV file as a dataset")
    create.add_argument("name")
    create.add_argument("--category", required=True, type=str.lower,
                        choices=["reasoning", "preference", "sft"])
    mapping = create.add_mutually_exclusive_group(required=True)
    mapping.add_argument("--column-mapping", metavar="JSON",
                         help='fields to CSV columns, e.g. \'{"prompt": "q", "target": "a"}\'')
    mapping.add_argument("--column-mapping-file", metavar="FILE")
    create.add_argument("--description")
    create.add_argument("--file", metavar="CSV", help="the CSV file to upload")
    create.add_argument("--hf-dataset", help="a Hugging Face dataset id (hosted service)")
    create.add_argument("--hf-config")
    create.add_argument("--hf-split")
    delete = datasets("delete", "datasets_delete", "delete a dataset")
    delete.add_argument("name")
    delete.add_argument("--yes", action="store_true")


def _add_experiments(build: _Builder) -> None:
    exp = build.group("experiments", "training jobs")
    submit = exp("submit", "exp_submit", "validate MANIFEST locally, then submit it")
    submit.add_argument("manifest", metavar="MANIFEST")
    submit.add_argument(
        "--resource-id",
        help="resource tier (default: arena-medium on the hosted service, "
        "the server's first tier elsewhere)",
    )
    submit.add_argument(
        "--num-nodes",
        type=_positive_int,
        help="nodes (default: 2 on the hosted service, the server's default elsewhere)",
    )
    submit.add_argument("--project")
    submit.add_argument("--experiment-name")
    submit.add_argument("--reward-file", help="reward module for reasoning-dataset jobs")
    submit.add_argument("--completion", help="completion used to test the reward module")
    submit.add_argument("--wait", action="store_true", help="wait for the job to end")
    submit.add_argument("--follow", action="store_true", help="print its log until it ends")
    listing = exp("list", "exp_list", "list a project's experiments")
    listing.add_argument("--project")
    for command, handler, text in (
        ("status", "exp_status", "show an experiment's state"),
        ("stop", "exp_stop", "stop a queued or running experiment"),
        ("checkpoints", "exp_checkpoints", "list an experiment's checkpoints"),
    ):
        sub = exp(command, handler, text)
        sub.add_argument("experiment_name", metavar="EXPERIMENT_NAME")
        if command == "status":
            sub.add_argument("--project")
    logs = exp("logs", "exp_logs", "print an experiment's log")
    logs.add_argument("experiment_name", metavar="EXPERIMENT_NAME")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    logs.add_argument(
        "--since",
        type=_non_negative_int,
        metavar="SEQ",
        help="only lines after sequence number SEQ",
    )
    resume = exp("resume", "exp_resume", "continue from the latest checkpoint")
    resume.add_argument("experiment_name", metavar="EXPERIMENT_NAME")
    resume.add_argument("--max-steps", type=_positive_int, required=True)
    metrics = exp("metrics", "exp_metrics", "download the metrics CSV and show a preview")
    metrics.add_argument("experiment_name", metavar="EXPERIMENT_NAME")
    metrics.add_argument("--metric", action="append", help="a column to keep (repeatable)")
    metrics.add_argument("--output-file", help="where to save (default EXPERIMENT_metrics.csv)")
    metrics.add_argument("--preview-rows", type=_non_negative_int, default=5)
    metrics.add_argument("--preview-only", action="store_true", help="do not save a file")
    metrics.add_argument("--names", action="store_true", help="only list the metric names")
    download = exp("download", "exp_download",
                   "download a checkpoint (default: the best) as a .tar.gz of the whole "
                   "population; says which member is the elite (agilerl evaluate plays it)")
    download.add_argument("experiment_name", metavar="EXPERIMENT_NAME")
    download.add_argument(
        "--checkpoint",
        metavar="NAME",
        help="a name 'experiments checkpoints' lists: gen<G>-step<S>, G the generation "
        "(from 1), S the population's steps, e.g. gen00003-step0000015000; a "
        "-member<K> suffix marks one taken mid-generation (default: the best)",
    )
    download.add_argument("-o", "--output", help="file or folder (default: current folder)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``arena`` command; returns (and, as a script, exits with) the status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.json_out = bool(getattr(args, "json_out", False))
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    from agilerl.arena.errors import ArenaError

    ArenaError.enable_cli_mode()
    from agilerl.arena import commands

    handler: Handler = getattr(commands, args.handler)
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure becomes one readable message
        return _report(exc, args.json_out)


def _report(exc: Exception, as_json: bool) -> int:
    """Print *exc* for a person (or as JSON) and return the exit status."""
    from agilerl.arena.errors import redact

    known = _known_failure(exc)
    if known is None:
        raise exc  # a defect in this program: keep the traceback for the bug report
    message, payload = known
    if as_json:
        print(redact(json.dumps({"ok": False, **payload}, default=str)), file=sys.stderr)
    else:
        print(f"Error: {redact(message)}", file=sys.stderr)
    return 1


def _known_failure(exc: Exception) -> tuple[str, dict[str, object]] | None:
    from agilerl.arena.errors import ArenaAPIError, ArenaError

    if isinstance(exc, ArenaAPIError):
        payload = {
            "error": exc.message,
            "status_code": exc.status_code,
            "error_code": exc.error_code,
            "type": type(exc).__name__,
        }
        return str(exc), payload
    if isinstance(exc, ArenaError):
        return str(exc), {"error": str(exc), "type": type(exc).__name__}
    to_dict = getattr(exc, "to_dict", None)
    if isinstance(exc, ValueError) and callable(to_dict):  # ManifestError: every problem, located
        return str(exc), {"error": "invalid manifest", **to_dict()}
    if type(exc).__name__ == "ValidationError" or isinstance(exc, OSError):
        return str(exc), {"error": str(exc), "type": type(exc).__name__}
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
