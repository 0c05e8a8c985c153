"""``ottla storage random-uuid | format``: prepare log directories, as kafka-storage.sh."""

from __future__ import annotations

import argparse
import base64
import binascii
import re
import secrets
import sys
import time
from dataclasses import replace
from typing import Any

from ottla.common.config import ConfigError
from ottla.common.features import (
    KRAFT_VERSION,
    METADATA_VERSION,
    SUPPORTED_FEATURES,
    default_feature_levels,
    dependency_refusal,
    scram_supported,
)
from ottla.common.uuids import random_uuid
from ottla.metadata import records as meta
from ottla.metadata.bootstrap import InitialVoter, metadata_version, write_bootstrap
from ottla.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted,
    salted_password,
)
from ottla.storage.meta_properties import MetaProperties, MetaPropertiesError, format_log_dirs


def add_parser(sub: Any) -> None:
    p = sub.add_parser("storage", help="format log directories",
                       description="Manage the storage of a node (kafka-storage.sh).")
    cmds = p.add_subparsers(dest="storage_command", metavar="COMMAND")
    cmds.required = True
    uuid_p = cmds.add_parser("random-uuid", help="print a new cluster id")
    uuid_p.set_defaults(run=lambda args: print(random_uuid()) or 0)
    fmt = cmds.add_parser("format", help="format the log directories of a node")
    fmt.add_argument("--cluster-id", "-t", required=True, help="the cluster id")
    fmt.add_argument("--config", "-c", required=True, help="the node's server.properties")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="skip directories that are already formatted")
    voters = fmt.add_mutually_exclusive_group()
    voters.add_argument("--standalone", "-s", action="store_true",
                        help="this controller is the only initial voter (dynamic quorum)")
    voters.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRID,...",
                        help="the initial voters of a dynamic quorum")
    voters.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="this controller joins an existing dynamic quorum")
    fmt.add_argument("--release-version", "-r", metavar="VERSION",
                     help="the metadata.version to start with: a release such as 3.9 "
                          "or a version such as 3.7-IV4 (default: the latest)")
    fmt.add_argument("--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
                     help="start a feature at this level instead of the release's "
                          "default, e.g. transaction.version=1")
    fmt.add_argument("--add-scram", "-S", action="append", default=[],
                     metavar="MECHANISM=[name=...,password=...]",
                     help="a SCRAM credential to start the metadata log with, e.g. "
                          "'SCRAM-SHA-256=[name=alice,password=alice-secret]' or "
                          "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\","
                          "saltedpassword=\"YCE=\"]' (repeatable)")
    fmt.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    fmt.set_defaults(run=run_format)


def run_format(args: argparse.Namespace) -> int:
    from ottla.cli.server import load_config

    try:
        config = load_config(args.config, args.override)
    except ConfigError as e:
        print(f"error: invalid configuration: {e}", file=sys.stderr)
        return 1
    try:
        version, level = metadata_version(args.release_version)
        features = feature_levels(args.feature, level)
        scram = scram_records(args.add_scram, version, level)
        initial = initial_voters(args, config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    dirs = config.all_log_dirs
    try:
        own = [v.directory_id for v in initial if v.node_id == config.node_id]
        formatted = format_log_dirs(dirs, args.cluster_id, config.node_id,
                                    ignore_formatted=args.ignore_formatted,
                                    directory_ids={config.metadata_log_dir: own[0]}
                                    if own and own[0] else None)
        if config.metadata_log_dir in formatted:
            if initial and initial[0].directory_id == "":
                initial = [replace(initial[0], directory_id=directory_id(
                    config.metadata_log_dir))]
            write_bootstrap(config.metadata_log_dir, level, initial,
                            int(time.time() * 1000), features, scram)
    except (MetaPropertiesError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for d in formatted:
        kind = "metadata directory" if d == config.metadata_log_dir else "data directory"
        print(f"Formatting {kind} {d} with metadata.version {version}.")
    if not formatted:
        print("All of the log directories are already formatted.")
    return 0


def feature_levels(given: list[str], metadata_level: int) -> dict[str, int]:
    """The release's default feature levels with ``--feature NAME=LEVEL`` applied, each
    checked against what this software supports and what it needs of the others (as
    kafka-storage.sh refuses)."""
    levels = default_feature_levels(metadata_level)
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not value.strip().isdigit():
            raise ValueError(f"--feature {text!r}: expected NAME=LEVEL")
        if name == METADATA_VERSION:
            raise ValueError("set metadata.version with --release-version")
        if name == KRAFT_VERSION:
            raise ValueError("kraft.version follows the quorum: 1 with --standalone, "
                             "--initial-controllers or --no-initial-controllers, 0 with "
                             "controller.quorum.voters (upgraded with `features upgrade`)")
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            known = sorted(set(SUPPORTED_FEATURES) - {METADATA_VERSION, KRAFT_VERSION})
            raise ValueError(f"unknown feature {name!r}; known: {', '.join(known)}")
        level = int(value)
        if level != 0 and not supported[0] <= level <= supported[1]:
            raise ValueError(f"{name} level {level} is outside the supported range "
                             f"{supported[0]}-{supported[1]}")
        levels[name] = level
    # Kafka's Formatter: each feature's dependencies, metadata.version the release's.
    for name, level in levels.items():
        reason = dependency_refusal(name, level, {**levels, METADATA_VERSION: metadata_level})
        if reason is not None:
            raise ValueError(reason)
    return levels


def scram_records(arguments: list[str], version: str, level: int
                  ) -> list[meta.UserScramCredentialRecord]:
    """The UserScramCredentialRecords of ``--add-scram`` arguments (Kafka's ScramParser,
    with its messages), refused below metadata.version 3.5-IV2 as kafka-storage.sh
    refuses them."""
    if arguments and not scram_supported(level):
        raise ValueError(f"SCRAM is only supported in {METADATA_VERSION} 3.5-IV2 or later.")
    return [scram_record(argument) for argument in arguments]


def _java_split(text: str) -> list[str]:
    """``String.split(",")`` as Java does it: trailing empty strings dropped."""
    parts = text.split(",")
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _base64(text: str, what: str) -> bytes:
    """Java's ``Base64.getDecoder().decode``: the standard alphabet, padding optional."""
    try:
        if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text) or len(text.rstrip("=")) % 4 == 1:
            raise ValueError(text)
        return base64.b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4),
                                validate=True)
    except (ValueError, binascii.Error):
        raise ValueError(f"Failed to decode given {what}: {text}") from None


def scram_record(argument: str) -> meta.UserScramCredentialRecord:
    """One ``--add-scram`` argument, ``MECHANISM=[key=value,...]`` with the keys ``name``
    (required), ``password`` or ``saltedpassword`` (base64, with ``salt``), ``salt``
    (base64; random by default) and ``iterations`` (4096 by default); a value may be in
    double quotes."""
    argument = argument.strip()
    mechanism_name, sep, config = argument.partition("=")
    if not sep:
        raise ValueError(f"Failed to find equals sign in SCRAM argument '{argument}'")
    mechanism = ScramMechanism.from_name(mechanism_name)
    if mechanism == ScramMechanism.UNKNOWN or mechanism.mechanism_name != mechanism_name:
        raise ValueError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not config.startswith("["):
        raise ValueError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ValueError("Expected configuration string to end with ]")
    components: dict[str, str] = {}
    for component in _java_split(config[1:-1]):
        key, sep, value = component.partition("=")
        if not sep:
            raise ValueError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    name = components.pop("name", None)
    if name is None:
        raise ValueError("You must supply 'name' to add-scram")
    salt_text = components.pop("salt", None)
    salt = None if salt_text is None else _base64(salt_text, "salt")
    iterations_text = components.pop("iterations", None)
    iterations = DEFAULT_ITERATIONS
    if iterations_text is not None:
        if not re.fullmatch(r"[+-]?[0-9]+", iterations_text) or \
                not -2**31 <= int(iterations_text) < 2**31:
            raise ValueError(f"Failed to parse iterations count: {iterations_text}")
        iterations = int(iterations_text)
    password = components.pop("password", None)
    salted_text = components.pop("saltedpassword", None)
    salted: bytes | None = None
    if password is None:
        if salted_text is None:
            raise ValueError("You must supply one of 'password' or 'saltedpassword' to "
                             "add-scram")
        if salt is None:
            raise ValueError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salted = _base64(salted_text, "saltedPassword")
    if components:
        raise ValueError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram "
                         f"using {mechanism.name}")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram "
                         f"using {mechanism.name}")
    if password == "" or salted == b"":
        # Kafka's ScramFormatter keys an HMAC with the password (or the salted password),
        # and Java refuses an empty key; no client could log in with it either.
        raise ValueError("Empty key")
    if salt is None:
        salt = secrets.token_bytes(32)
    if salted is None:
        assert password is not None
        salted = salted_password(mechanism, password, salt, iterations)
    credential = credential_from_salted(mechanism, salted, salt, iterations)
    return meta.UserScramCredentialRecord(
        name=name, mechanism=int(mechanism), salt=credential.salt,
        stored_key=credential.stored_key, server_key=credential.server_key,
        iterations=iterations)


def initial_voters(args: argparse.Namespace, config: Any) -> list[InitialVoter]:
    """The voters the bootstrap snapshot names, validated as kafka-storage.sh does."""
    dynamic_flag = args.standalone or args.initial_controllers or args.no_initial_controllers
    is_controller = "controller" in config.roles
    if config["controller.quorum.voters"]:
        if dynamic_flag:
            raise ValueError("--standalone, --initial-controllers and --no-initial-controllers "
                             "are for a dynamic quorum; this node sets controller.quorum.voters")
        return []
    if is_controller and not dynamic_flag:
        raise ValueError("because controller.quorum.voters is not set on this controller, "
                         "give one of --standalone, --initial-controllers or "
                         "--no-initial-controllers")
    if dynamic_flag and not is_controller:
        raise ValueError("--standalone, --initial-controllers and --no-initial-controllers "
                         "apply to controllers only")
    if args.initial_controllers:
        voters = [InitialVoter.parse(v) for v in args.initial_controllers.split(",") if v]
        if config.node_id not in {v.node_id for v in voters}:
            raise ValueError(f"--initial-controllers does not name this node "
                             f"({config.node_id})")
        return voters
    if args.standalone:
        names = set(config.controller_listener_names)
        listeners = [ln for ln in config.listeners if ln.name in names]
        if not listeners:
            raise ValueError("--standalone needs a controller listener in listeners")
        host = listeners[0].host or "localhost"
        return [InitialVoter(config.node_id, host, listeners[0].port, "")]
    return []


def directory_id(log_dir: str) -> str:
    meta = MetaProperties.read(log_dir)
    assert meta is not None
    return meta.directory_id
