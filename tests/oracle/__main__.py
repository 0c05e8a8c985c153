"""``python -m tests.oracle run [--scenario NAME ...] [--all]``: start one Kafka node and one
Ottla node, run the scenarios on both, print every difference; ``--list`` lists them.

Exit status 0 when every scenario's differences are exactly the declared ones, 1 if not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.oracle.model import SCENARIOS
from tests.oracle.normalise import describe_rules
from tests.oracle.runner import Outcome, run_scenario, select
from tests.oracle.target import Target


def list_scenarios() -> None:
    import tests.oracle.scenarios  # noqa: F401 - registers every scenario

    width = max(len(name) for name in SCENARIOS)
    family_width = max(len(s.family) for s in SCENARIOS.values())
    print(f"{'scenario':<{width}}  {'family':<{family_width}}  CI  bugs  legitimate")
    for s in SCENARIOS.values():
        bugs = len({e.reason for e in s.expect if e.is_bug})
        legit = len({e.reason for e in s.expect if not e.is_bug})
        print(f"{s.name:<{width}}  {s.family:<{family_width}}  {'CI' if s.ci else '  '}"
              f"  {bugs:>4}  {legit:>10}")
    print("\n(bugs and legitimate: the distinct reasons each scenario declares)")
    print("\nnormalised everywhere (field, how, why):")
    for name, how, why in describe_rules():
        print(f"  {name}: {how}: {why}")


def attach(spec: str, side: str) -> Target:
    bootstrap, _, controller = spec.partition(",")
    return Target(side, bootstrap, controller or bootstrap,  # type: ignore[arg-type]
                  run_tag=f"-{int(time.time()) % 100000}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the scenarios")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run scenarios on Kafka and on Ottla, and compare")
    run.add_argument("--scenario", "-s", action="append", default=[], metavar="NAME",
                     help="a scenario, a family or an fnmatch pattern (repeatable); "
                          "default: the CI subset")
    run.add_argument("--all", action="store_true", help="every scenario")
    run.add_argument("--list", action="store_true", help="list the scenarios")
    run.add_argument("--serial", action="store_true",
                     help="run each scenario on Kafka, then on Ottla (default: at once)")
    run.add_argument("--json", type=Path, metavar="FILE",
                     help="write each scenario's raw and normalised results and diffs")
    run.add_argument("--base", type=Path, help="where the nodes' directories go "
                     "(default: a temporary directory, removed after)")
    run.add_argument("--verbose", "-v", action="store_true",
                     help="also print the accepted differences of scenarios that pass")
    run.add_argument("--kafka", metavar="BOOTSTRAP[,CONTROLLER]",
                     help="use this running Kafka node instead of starting one")
    run.add_argument("--ottla", metavar="BOOTSTRAP[,CONTROLLER]",
                     help="use this running Ottla node instead of starting one")
    args = parser.parse_args(argv)
    if args.list or (args.command == "run" and args.list):
        list_scenarios()
        return 0
    if args.command != "run":
        parser.print_help()
        return 2
    try:
        scenarios = select(args.scenario, args.all)
    except KeyError as e:
        print(e.args[0], file=sys.stderr)
        return 2

    def go(kafka: Target, ottla: Target) -> list[Outcome]:
        outcomes = []
        for s in scenarios:
            outcome = run_scenario(s, kafka, ottla, parallel=not args.serial)
            print(outcome.report(accepted=args.verbose or not outcome.ok), flush=True)
            outcomes.append(outcome)
        return outcomes

    started = time.monotonic()
    if args.kafka and args.ottla:
        outcomes = go(attach(args.kafka, "kafka"), attach(args.ottla, "ottla"))
    else:
        from tests.oracle.nodes import running_pair

        with tempfile.TemporaryDirectory(prefix="ottla-oracle-") as tmp, \
                running_pair(args.base or Path(tmp)) as pair:
            print(f"kafka {pair.kafka.bootstrap}, ottla {pair.ottla.bootstrap} "
                  f"(started in {time.monotonic() - started:.1f} s)", flush=True)
            outcomes = go(pair.kafka, pair.ottla)
    failed = [o for o in outcomes if not o.ok]
    bugs = sorted({e.reason for o in outcomes for e in o.bugs})
    print(f"\n{len(outcomes)} scenario(s) in {time.monotonic() - started:.1f} s: "
          f"{len(outcomes) - len(failed)} as declared, {len(failed)} not"
          + (f" ({', '.join(o.scenario.name for o in failed)})" if failed else "")
          + f"; {len(bugs)} known Ottla bug(s) accepted")
    for reason in bugs:
        print(f"  {reason}")
    if args.json:
        args.json.write_text(json.dumps([{
            "scenario": o.scenario.name, "ok": o.ok, "raw": o.raw,
            "normalised": o.normalised, "errors": o.errors,
            "unexpected": [d.__dict__ for d in o.unexpected],
            "accepted": [{**d.__dict__, "reason": e.reason} for d, e in o.accepted],
            "stale": [e.path for e in o.stale]} for o in outcomes], indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
