"""``ottla chaos run``: a cluster of real ottla processes with faults injected (kill -9,
pauses, link cuts, one-way partitions, slow and delayed links) while real clients run a
workload; their history is checked against Kafka's guarantees (docs/testing.md). Exits
1 when the checker found a violation."""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

from ottla.chaos.faults import KINDS


def add_parser(sub: Any) -> None:
    p = sub.add_parser("chaos", help="fault-test a cluster of local processes")
    commands = p.add_subparsers(dest="chaos_command", metavar="COMMAND")
    commands.required = True
    r = commands.add_parser("run", help="run a workload under faults and check its history")
    r.add_argument("--workload", default="all",
                   choices=("produce", "group", "transactional", "share", "all"))
    r.add_argument("--duration", type=float, default=60.0,
                   help="seconds of workload under faults (startup and the final read "
                        "come on top)")
    r.add_argument("--report", required=True, metavar="DIR",
                   help="where history.jsonl, report.json, timeline.svg and the logs go")
    r.add_argument("--seed", type=int, default=None,
                   help="the fault schedule's seed (default: a random one, reported)")
    r.add_argument("--nodes", type=int, default=3, help="combined nodes (default 3)")
    r.add_argument("--group-protocol", default="consumer", choices=("consumer", "classic"))
    r.add_argument("--faults", default=",".join(KINDS),
                   help=f"the kinds of fault to inject (default all: {','.join(KINDS)})")
    r.add_argument("--rate", type=float, default=150.0,
                   help="records a second per producer (default 150)")
    r.add_argument("--no-churn", dest="churn", action="store_false",
                   help="keep the group's members (default: one leaves and another joins "
                        "every 10 s)")
    r.add_argument("--client-debug", default=None, metavar="CONTEXTS",
                   help="librdkafka debug contexts of the clients, e.g. cgrp (clients.log)")
    r.add_argument("--mutate", default=None,
                   choices=("lose-write", "duplicate", "read-uncommitted", "accept-twice"),
                   help="break the run on purpose: it must report it (lose-write, "
                        "duplicate: the final read; read-uncommitted: the transactional "
                        "sink's final read; accept-twice: a share acceptance recorded twice)")
    r.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ottla.chaos.runner import RunConfig
    from ottla.chaos.runner import run as run_chaos

    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown fault kinds {sorted(unknown)}; there are {KINDS}")
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    report = run_chaos(RunConfig(
        workload=args.workload, duration_s=args.duration, report_dir=args.report,
        seed=seed, nodes=args.nodes, group_protocol=args.group_protocol, kinds=kinds,
        rate=args.rate, mutate=args.mutate, client_debug=args.client_debug, churn=args.churn))
    summary = {k: report[k] for k in ("workload", "seed", "operations", "checks", "faults",
                                      "leader_changes", "timings")}
    print(json.dumps(summary, indent=2))
    if report["violation_count"]:
        print(f"{report['violation_count']} violations; the smallest:")
        print(json.dumps(report["smallest_violation"], indent=2))
        return 1
    if report["renumbered"]:
        print(f"{report['renumbered']} records written again by their producer under a "
              "new epoch (the client's resend, not a broker's duplicate): "
              "renumbered_examples in report.json")
    print(f"no violations; report in {args.report}/report.json")
    return 0
