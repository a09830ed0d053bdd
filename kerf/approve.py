"""`kerf approve`: approve the proposal a RightsizingRecommendation shows (audit mode), or
every step toward its target; with no workload, list what awaits approval."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from app.kube.apitimeout import add_api_timeout_argument


def add_approve_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "approve",
        help="approve a proposal waiting in audit mode, or list what awaits approval",
        description="Approves the proposal the workload's RightsizingRecommendation shows: "
        "the next guardrail step, applied once (it replaces an earlier approval). With "
        "--target, every step toward the target shown, each still at least one cooldown "
        "after the last change; a new target, or a rollback, needs a new approval. With no "
        "workload, lists the proposals that await approval.",
    )
    p.add_argument(
        "workload",
        nargs="?",
        metavar="KIND/NAME",
        help="the workload, such as deployment/web (default: none, list what awaits approval)",
    )
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the workload's namespace (default: the kubeconfig context's, else default); "
        "the list shows every namespace unless given",
    )
    p.add_argument(
        "--target",
        action="store_true",
        help="approve every step toward the target, not only the next one",
    )
    p.add_argument(
        "--kubeconfig", type=Path, default=None, help="kubeconfig (default: as kubectl finds it)"
    )
    add_api_timeout_argument(p, "give up when the API server does not answer within this")
    p.set_defaults(handler=approve_command)


def approve_command(args: argparse.Namespace) -> int:
    return asyncio.run(_approve(args))


async def _approve(args: argparse.Namespace) -> int:
    from kerf.records_api import Records

    async with Records.connect(args.kubeconfig, args.api_timeout) as records:
        if args.workload is None:
            items, _ = await records.list(args.namespace)
            return _list_awaiting(items)
        return await _approve_one(records, args)


def _list_awaiting(items: list[dict[str, Any]]) -> int:
    from app.policy.record_summary import approval, workload_of
    from kerf.report_table import render_table

    rows = []
    for record in items:
        if approval(record) != "awaiting":
            continue
        status = record.get("status") or {}
        proposal = status["proposal"]
        current = status.get("current") or {}
        step = _change(current, proposal.get("containers"))
        target = _change(current, proposal.get("target"))
        rows.append(
            [
                record["metadata"].get("namespace", ""),
                workload_of(record),
                str(proposal.get("steps") or 1),
                step,
                target,
            ]
        )
    if not rows:
        print("kerf approve: nothing awaits approval", file=sys.stderr)
        return 0
    header = ["NAMESPACE", "WORKLOAD", "STEPS", "NEXT STEP", "TARGET"]
    sys.stdout.write(render_table([header, *rows]))
    return 0


async def _approve_one(records: Any, args: argparse.Namespace) -> int:
    from app.model.annotations import APPROVE, APPROVE_TARGET
    from app.policy.record_summary import status_time, when, workload_of
    from app.runtime.clock import utc_now
    from kerf.records_api import default_namespace, record_name_of

    namespace = args.namespace or default_namespace(args.kubeconfig)
    name = record_name_of(args.workload)
    record = await records.get(namespace, name)
    if record is None:
        print(
            f"kerf approve: no RightsizingRecommendation {name} in namespace {namespace}: kerf "
            f"does not manage {args.workload} there (`kerf approve` lists what awaits approval)",
            file=sys.stderr,
        )
        return 1
    status = record.get("status") or {}
    proposal = status.get("proposal") or {}
    shown = f"{workload_of(record)} in {namespace}"
    if not proposal.get("id"):
        reason = (status.get("summary") or {}).get("reason") or status.get("reason") or "-"
        print(
            f"kerf approve: {shown} shows no proposal to approve (phase "
            f"{status.get('phase') or 'Pending'}, reason {reason}); proposals come from "
            "policies in audit mode",
            file=sys.stderr,
        )
        return 1
    if args.target and not proposal.get("targetId"):
        print(
            f"kerf approve: {shown}: the proposal names no target id (a reconciler older "
            "than --target wrote it); approve one step at a time",
            file=sys.stderr,
        )
        return 1
    annotations = (
        {APPROVE_TARGET: proposal["targetId"], APPROVE: None}
        if args.target
        else {APPROVE: proposal["id"], APPROVE_TARGET: None}
    )
    await records.annotate(namespace, name, annotations)
    current = status.get("current") or {}
    steps = int(proposal.get("steps") or 1)
    first = proposal.get("nextAt")
    at = when(status_time(first), utc_now())
    step = _change(current, proposal.get("containers"))
    if args.target:
        target = _change(current, proposal.get("target"))
        cooldown = proposal.get("cooldown") or "the cooldown"
        print(
            f"approved every step of {shown} toward {target}: {steps} step(s), the first "
            f"{at}, each later one at least {cooldown} after the one before"
        )
    else:
        more = f"; {steps - 1} more step(s) to the target will need approval" if steps > 1 else ""
        print(f"approved proposal {proposal['id']} of {shown}: {step}, {at}{more}")
    return 0


def _change(current: dict[str, Any], values: dict[str, Any] | None) -> str:
    """Every container, current → as `values` sets it (a container it leaves keeps its
    values)."""
    from app.policy.record_summary import per_container, target_values

    return "; ".join(per_container(current, target_values(current, (), values)))
