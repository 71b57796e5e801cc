"""What each ``arena`` command does (the parser lives in :mod:`agilerl.arena.cli`).

Every handler takes the parsed arguments and returns the exit status. Answers go to
stdout (a table, or JSON with ``--json``); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agilerl.arena import config
from agilerl.arena.errors import ArenaFileNotFoundError
from agilerl.arena.output import csv_table, emit, experiment_summary, table
from agilerl.arena.stream import CheckEvent, ErrorEvent, Event, LogEvent, StatusEvent

if TYPE_CHECKING:
    from agilerl.arena.client import ArenaClient
    from agilerl.arena.download import ArchiveSummary
    from agilerl.core.value_types import JsonScalar

# The hosted service's own defaults for `experiments submit`; a self-hosted server
# picks its own (its tiers have other names).
HOSTED_RESOURCE_ID = "arena-medium"
HOSTED_NUM_NODES = 2


def _progress(event: Event) -> None:
    if isinstance(event, StatusEvent) and event.message:
        print(f"[{event.stage or event.status}] {event.message}", file=sys.stderr)
    elif isinstance(event, CheckEvent):
        verdict = {True: "PASS", False: "FAIL", None: "UNKNOWN"}[event.success]
        if event.success and event.warnings:
            verdict = "WARNING"
        detail = f": {event.error}" if event.error else ""
        print(f"  {verdict:8} {event.name}{detail}", file=sys.stderr)
    elif isinstance(event, LogEvent):
        print(event.text, file=sys.stderr)


def _client(args: argparse.Namespace) -> ArenaClient:
    from agilerl.arena.client import ArenaClient  # httpx loads only for commands that talk

    ArenaClient.configure(
        base_url=args.base_url,
        keycloak_url=args.keycloak_url,
        realm=args.realm,
        client_id=args.client_id,
    )
    client = ArenaClient(
        api_key=args.api_key,
        request_timeout=args.request_timeout,
        upload_timeout=args.upload_timeout,
        verbose=False,
    )
    if not args.json_out:
        client.set_stream_handler(_progress)
    return client


def _say(args: argparse.Namespace, message: str, value: object = None) -> int:
    if args.json_out:
        emit({"ok": True, "message": message, "data": value}, True)
    else:
        print(message)
    return 0


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    try:
        answer = input(f"{question} [y/N]: ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


# -- account --------------------------------------------------------------------------------
def login(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.login_api_key:
            key = args.login_api_key
            if key == "-":
                key = sys.stdin.readline().strip()
            profile = client.store_api_key(key)
            who = profile.get("email") or profile.get("id") or "your account"
            return _say(args, f"Signed in to {client.base_url} as {who} (API key stored).")
        if client.credential_source in ("argument", "environment") and not args.force:
            where = "--api-key" if client.credential_source == "argument" else "ARENA_API_KEY"
            return _say(
                args,
                f"An API key from {where} is in use; no login needed "
                "(use --force to sign in with the browser anyway).",
            )
        client.login(
            timeout=args.timeout,
            force=args.force,
            open_browser=not args.no_browser and sys.stdout.isatty(),
        )
        return _say(args, f"Signed in to {client.base_url}.")


def logout(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.logout()
    return _say(args, "Signed out; stored credentials removed.")


def user_profile(args: argparse.Namespace) -> int:
    with _client(args) as client:
        profile = client.get_user_profile()
    if args.json_out:
        emit(profile, True)
    else:
        name = " ".join(str(profile.get(k) or "") for k in ("first_name", "last_name")).strip()
        print(f"User: {name or '-'}")
        print(f"Email: {profile.get('email') or '-'}")
    return 0


def user_credits(args: argparse.Namespace) -> int:
    with _client(args) as client:
        emit(client.get_credits(), args.json_out)
    return 0


def resources_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        tiers = cast("dict[str, dict[str, JsonScalar]]", client.list_resources().get("tiers", {}))
    if args.json_out:
        emit(tiers, True)
        return 0
    rows = []
    ordered = sorted(tiers.items(), key=lambda kv: float(kv[1].get("price_per_node_hour") or 0))
    for key, tier in ordered:
        gpus = f"{tier.get('num_gpus')}x {tier.get('gpu_type')}" if tier.get("gpu_type") else "-"
        price = f"{float(tier.get('price_per_node_hour') or 0):.2f}"
        rows.append([key, gpus, tier.get("num_cpus", "-"), tier.get("ram_gb", "-"), price])
    headers = ["Resource ID", "GPUs", "CPUs", "RAM (GB)", "Credits/node-hour"]
    print(table(headers, rows) if rows else "(no resources)")
    return 0


# -- projects ---------------------------------------------------------------------------------
def projects_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        projects = client.list_projects()
    if args.json_out:
        emit(projects, True)
    else:
        keys = ("name", "type", "description")
        emit([{k.capitalize(): p.get(k) for k in keys} for p in projects], False)
    return 0


def projects_create(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.create_project(args.name, args.description, args.llm_based)
    return _say(args, f"Project '{args.name}' created.", answer)


def projects_delete(args: argparse.Namespace) -> int:
    if not _confirm(f"Delete project '{args.name}' and its experiments?", args.yes):
        return _say(args, "Aborted.")
    with _client(args) as client:
        answer = client.delete_project(args.name)
    return _say(args, f"Project '{args.name}' deleted.", answer)


def projects_set_default(args: argparse.Namespace) -> int:
    with _client(args) as client:
        client.set_default_project(args.name)
    return _say(args, f"Default project set to '{args.name}'.")


def projects_get_default(args: argparse.Namespace) -> int:
    name = config.read_default_project()
    if args.json_out:
        emit({"default_project": name}, True)
    else:
        print(name or "No default project; set one with 'arena projects set-default NAME'.")
    return 0


# -- environments -----------------------------------------------------------------------------
def env_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        found = client.list_environments(args.name, args.include_arena)
    if found or args.json_out:
        emit(found, args.json_out)
        return 0
    # Your own environments are always listed; an empty answer means there are none yet.
    what = f"matching '{args.name}'" if args.name else "of your own yet"
    print(f"No environments {what}.")
    if not args.include_arena:
        print("Upload one with 'arena env validate NAME --source DIR'; "
              "'arena env list --include-arena' also lists the built-in ones.")
    return 0


def env_exists(args: argparse.Namespace) -> int:
    with _client(args) as client:
        found = client.environment_exists(args.name, args.version)
    emit({"exists": found} if args.json_out else str(found), args.json_out)
    return 0


def env_entrypoints(args: argparse.Namespace) -> int:
    with _client(args) as client:
        points = client.list_environment_entrypoints(args.name, args.version)
    if args.json_out:
        emit(points, True)
    else:
        print(table(["Entrypoints"], [[p] for p in points]) if points else "(none)")
    return 0


def env_validate(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.validate_environment(
            args.name,
            version=args.version,
            source=args.source,
            env_config=args.env_config,
            requirements=args.requirements,
            entrypoint=args.entrypoint,
            description=args.description,
            multi_agent=args.multi_agent,
            language_based=args.language_based,
            do_rollouts=args.do_rollouts,
        )
    emit(result, args.json_out)
    return 0


def env_profile(args: argparse.Namespace) -> int:
    with _client(args) as client:
        emit(client.profile_environment(args.name, args.version), args.json_out)
    return 0


def env_delete(args: argparse.Namespace) -> int:
    what = f"{args.name}:{args.version}" if args.version else f"every version of {args.name}"
    if not _confirm(f"Delete {what}?", args.yes):
        return _say(args, "Aborted.")
    with _client(args) as client:
        answer = client.delete_environment(args.name, args.version)
    return _say(args, f"Deleted {what}.", answer)


def env_duplicate(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.duplicate_environment_version(args.name, args.new_version, args.version)
    source = answer.get("source_version") if isinstance(answer, dict) else None
    return _say(args, f"Copied {args.name}:{source or args.version or 'latest'} to"
                f" {args.name}:{args.new_version}.", answer)


# -- datasets ---------------------------------------------------------------------------------
def datasets_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        emit(client.list_datasets(args.name, args.search), args.json_out)
    return 0


def datasets_exists(args: argparse.Namespace) -> int:
    with _client(args) as client:
        emit(client.dataset_exists(args.name), args.json_out)
    return 0


def datasets_create(args: argparse.Namespace) -> int:
    from agilerl.arena.datasets import load_column_mapping

    mapping = load_column_mapping(args.column_mapping, args.column_mapping_file)
    if args.file is not None and not Path(args.file).is_file():
        raise ArenaFileNotFoundError(f"Dataset file not found: {args.file}")
    with _client(args) as client:
        answer = client.create_dataset(
            args.name, args.category, mapping, description=args.description, file=args.file,
            hf_dataset_name=args.hf_dataset, hf_config=args.hf_config, hf_split=args.hf_split,
        )
    rows = answer.get("rows")
    return _say(args, f"Created dataset {args.name}" + (f" ({rows} rows)." if rows else "."),
                answer)


def datasets_delete(args: argparse.Namespace) -> int:
    if not _confirm(f"Delete dataset {args.name}?", args.yes):
        return _say(args, "Aborted.")
    with _client(args) as client:
        answer = client.delete_dataset(args.name)
    return _say(args, f"Deleted dataset {args.name}.", answer)


# -- experiments --------------------------------------------------------------------------------
def exp_submit(args: argparse.Namespace) -> int:
    if not Path(args.manifest).is_file():
        raise ArenaFileNotFoundError(f"Manifest file not found: {args.manifest}")
    with _client(args) as client:
        hosted = client.base_url == config.DEFAULT_BASE_URL
        resource = args.resource_id or (HOSTED_RESOURCE_ID if hosted else None)
        nodes = args.num_nodes or (HOSTED_NUM_NODES if hosted else None)
        ack = client.submit_experiment(
            args.manifest,
            resource_id=resource,
            num_nodes=nodes,
            project=args.project,
            experiment_name=args.experiment_name,
            reward_file=args.reward_file,
            completion=args.completion,
        )
        emit(ack, args.json_out)
        if not (args.wait or args.follow):
            return 0
        name = str(ack.get("experiment_name") or args.experiment_name or "")
        if args.follow:
            _follow(client, name, args.json_out)
        project = cast("str | None", ack.get("project"))  # the server's answer
        final = client.wait_for_experiment(name, project=project or args.project)
    if not args.json_out:
        print(f"Experiment '{name}' ended: {final.get('state')}", file=sys.stderr)
    else:
        emit(final, True)
    return 0 if str(final.get("state")).upper() == "COMPLETED" else 1


def exp_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        emit(client.list_experiments(args.project), args.json_out)
    return 0


def exp_status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        row = client.get_experiment_status(args.experiment_name, args.project)
    if args.json_out:
        emit(row, True)
    else:
        print(experiment_summary(row))
    return 0


def _event_json(event: Event) -> str:
    return json.dumps({"type": type(event).__name__, **dataclasses.asdict(event)}, default=str)


def _follow(
    client: ArenaClient, name: str, as_json: bool, since: int | None = None, follow: bool = True
) -> str | None:
    """Print the log; return the final state the server reported (``None`` if none)."""
    state: str | None = None
    with client.stream_experiment_logs(name, follow=follow, since=since) as stream:
        for event in stream:
            if as_json:
                print(_event_json(event), flush=True)
            elif isinstance(event, LogEvent):
                print(event.text, flush=True)
            if isinstance(event, StatusEvent) and event.detail.get("state"):
                state = str(event.detail["state"])
            elif isinstance(event, ErrorEvent):
                state = str(event.extras.get("state") or "FAILED")
                if not as_json:
                    print(f"Experiment failed: {event.message}", file=sys.stderr)
    return state


def exp_logs(args: argparse.Namespace) -> int:
    with _client(args) as client:
        state = _follow(client, args.experiment_name, args.json_out, args.since, args.follow)
    if args.follow and state and not args.json_out:
        print(f"Experiment '{args.experiment_name}' ended: {state}", file=sys.stderr)
    return 1 if state == "FAILED" else 0


def exp_stop(args: argparse.Namespace) -> int:
    with _client(args) as client:
        answer = client.stop_experiment(args.experiment_name)
    if args.json_out or isinstance(answer, (dict, list)):
        emit(answer, args.json_out)
        return 0
    return _say(args, f"Stop requested for '{args.experiment_name}'.")


def exp_resume(args: argparse.Namespace) -> int:
    with _client(args) as client:
        emit(client.resume_experiment(args.experiment_name, args.max_steps), args.json_out)
    return 0


def exp_checkpoints(args: argparse.Namespace) -> int:
    with _client(args) as client:
        rows = client.list_checkpoints(args.experiment_name)
    if args.json_out:
        emit(rows, True)
        return 0
    rows = sorted(rows, key=lambda r: cast(float, r.get("steps") or 0))  # server JSON
    shaped = []
    for row in rows:
        first = {"steps": row.get("steps")}
        rest = {k: v for k, v in row.items() if k != "steps"}
        if isinstance(rest.get("size_mb"), (int, float)):
            rest["size_mb"] = f"{rest['size_mb']:.2f}"
        shaped.append({**first, **rest})
    emit(shaped, False)
    return 0


def exp_metrics(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.names:
            emit(client.list_experiment_metric_names(args.experiment_name), args.json_out)
            return 0
        saved = None
        if not args.preview_only:
            saved = client.download_experiment_metrics(
                args.experiment_name, args.output_file, args.metric
            )
        preview = ""
        if args.preview_rows:
            body, _, _ = client.preview_experiment_metrics_csv(
                args.experiment_name, preview_rows=args.preview_rows, metrics=args.metric
            )
            preview = body.decode("utf-8", errors="replace")
    if args.json_out:
        emit({"saved_to": str(saved) if saved else None, "preview_csv": preview}, True)
        return 0
    if saved:
        print(f"Metrics saved to {saved}", file=sys.stderr)
    if preview:
        print(csv_table(preview))
    return 0


def exp_download(args: argparse.Namespace) -> int:
    from agilerl.arena.download import archive_summary

    with _client(args) as client:
        path = client.download_checkpoint(args.experiment_name, args.checkpoint, args.output)
    info = archive_summary(path) or {}
    return _say(args, download_message(path, info),
                {"path": str(path), "checkpoint": info.get("checkpoint"),
                 "pop_size": info.get("pop_size"), "elite_member": info.get("elite_member")})


def download_message(path: str | os.PathLike[str], info: ArchiveSummary) -> str:
    """What ``experiments download`` says: where the checkpoint went, which member is the
    elite (the archive holds the whole population), and how to evaluate it."""
    if not info:  # not an agilerl checkpoint archive: nothing more is known about it
        return f"Checkpoint saved to {path}"
    name = info.get("checkpoint")
    message = f"Checkpoint {name + ' ' if name else ''}saved to {path}"
    if info.get("pop_size") is not None:
        message += f"\n  it holds the whole population ({info['pop_size']} members)"
    elite = info.get("elite_member")
    message += (f"; the elite is member {elite}" if elite is not None else
                "; no elite was chosen yet (evaluate picks the best last fitness)")
    return message + f"\n  evaluate the elite with: agilerl evaluate {path}"
