"""``ottla features``: describe and change finalized feature levels (kafka-features.sh).

``describe`` prints each feature's supported range and finalized level; ``upgrade`` /
``downgrade`` take ``--metadata VERSION`` (a release such as 3.9 or 3.7-IV4) or
``--feature name=level`` (repeatable), with ``--dry-run`` to validate only. The features:
metadata.version, transaction.version, eligible.leader.replicas.version and share.version
(0: share groups off, 1: share groups, 2: their dead-letter queues).
"""

from __future__ import annotations

import argparse
from typing import Any

from ottla.cli.common import connect, fail, read_command_config
from ottla.common.features import METADATA_VERSION
from ottla.metadata.bootstrap import METADATA_VERSIONS, metadata_version

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
_NAMES = {level: name for name, level in METADATA_VERSIONS.items()}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("features", help="describe or change feature levels (kafka-features.sh)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server")
    where.add_argument("--bootstrap-controller")
    p.add_argument("--command-config",
                   help="a file of client properties (security.protocol, sasl.*, ssl.*)")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("describe", help="the supported and finalized levels").set_defaults(
        run=run_describe)
    for name in ("upgrade", "downgrade"):
        q = actions.add_parser(name, help=f"{name} feature levels")
        q.add_argument("--metadata", help="the metadata.version, e.g. 3.9 or 3.7-IV4")
        q.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL")
        q.add_argument("--dry-run", action="store_true")
        if name == "downgrade":
            q.add_argument("--unsafe", action="store_true")
        q.set_defaults(run=run_update)


def _level_name(feature: str, level: int) -> str:
    """Kafka's FeatureCommand.levelToString: a metadata.version by its release name, any
    other feature (share.version, transaction.version, ...) by its number."""
    if feature != METADATA_VERSION:
        return str(level)
    return _NAMES.get(level, f"UNKNOWN {level}")


def run_describe(args: argparse.Namespace) -> int:
    """One line per supported feature, sorted by name; a feature not finalized is at level
    0 (as ``share.version`` is after a downgrade to 0), as kafka-features.sh prints it."""
    address = args.bootstrap_server or args.bootstrap_controller
    with connect(address, "ottla-features", read_command_config(args.command_config)) as client:
        versions = client.api_versions()
    finalized = {f.name: f.max_version_level for f in versions.finalized_features}
    for f in sorted(versions.supported_features, key=lambda f: f.name):
        level = finalized.get(f.name, 0)
        print(f"Feature: {f.name}\tSupportedMinVersion: {_level_name(f.name, f.min_version)}"
              f"\tSupportedMaxVersion: {_level_name(f.name, f.max_version)}"
              f"\tFinalizedVersionLevel: {_level_name(f.name, level)}"
              f"\tEpoch: {versions.finalized_features_epoch}")
    return 0


def run_update(args: argparse.Namespace) -> int:
    from ottla.protocol.api import ApiKey

    updates: dict[str, int] = {}
    try:
        if args.metadata:
            updates[METADATA_VERSION] = metadata_version(args.metadata)[1]
        for item in args.feature:
            name, sep, level = item.partition("=")
            if not sep:
                raise ValueError(f"--feature expects name=level, got {item!r}")
            updates[name] = int(level)
    except ValueError as e:
        return fail(str(e))
    if not updates:
        return fail("give --metadata or --feature")
    kind = UPGRADE if args.action == "upgrade" else \
        (UNSAFE_DOWNGRADE if getattr(args, "unsafe", False) else SAFE_DOWNGRADE)
    address = args.bootstrap_server or args.bootstrap_controller
    with connect(address, "ottla-features", read_command_config(args.command_config)) as client:
        response = client.request(ApiKey.UPDATE_FEATURES, 1, {
            "timeout": 60000, "validate_only": args.dry_run, "feature_updates": [
                {"feature": n, "max_version_level": lvl, "upgrade_type": kind}
                for n, lvl in updates.items()]})
    verb = args.action
    if response.error_code != 0:  # the update failed for all features (as Kafka answers)
        for name, level in updates.items():
            print(f"Could not {verb} {name} to {_level_name(name, level)}. "
                  f"{response.error_message}")
        return 1
    failed = 0
    for result in response.results:
        level = _level_name(result.feature, updates[result.feature])
        if result.error_code == 0:
            prefix = "validated" if args.dry_run else f"was {verb}d"
            print(f"{result.feature} {prefix} to {level}.")
        else:
            failed += 1
            print(f"Could not {verb} {result.feature} to {level}. {result.error_message}")
    return 1 if failed else 0
