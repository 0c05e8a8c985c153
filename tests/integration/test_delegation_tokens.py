"""Delegation tokens (KIP-48), against Apache Kafka 4.4 as the oracle: one Kafka node and
one Ottla node configured alike (``delegation.token.secret.key``, the ``StandardAuthorizer``
with ``super.users=User:ANONYMOUS`` on the PLAINTEXT listener, a SASL_PLAINTEXT listener
with SCRAM-SHA-512 where the users alice, bob and carol log in). Each step runs the same
real programs against both, as the same user, and asserts what the user sees on Kafka,
then that Ottla shows the same: Kafka's own ``kafka-delegation-tokens`` tool (its output,
token ids, HMACs and dates aside) and Kafka's Java producer authenticating with the token
(SCRAM with ``tokenauth="true"``: librdkafka has no such option).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests import java_clients
from tests.helpers import OttlaProcess, free_port, wait_until
from tests.kafka_ref.cluster import KafkaCluster, run_tool, single_node
from tests.kafka_ref.install import install
from tests.kafka_tools import require_kafka, tool_jvm_opts

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
T = TypeVar("T")


def secured(plaintext: int, controller: int, sasl: int) -> dict[str, str]:
    """The same settings for both nodes, around their own ports."""
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plaintext},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "num.partitions": "1",
        "delegation.token.secret.key": "the-token-secret",
        "delegation.token.expiry.check.interval.ms": "1000",
    }


@dataclass
class System:
    """One of the two nodes as the tests use it."""

    name: str
    plaintext: str
    sasl: str
    root: Path

    def admin(self) -> AdminClient:
        """The administrator: the PLAINTEXT listener's ANONYMOUS, a super user."""
        return AdminClient({"bootstrap.servers": self.plaintext})

    def properties(self, file: str, name: str, password: str, token: bool = False) -> Path:
        """A ``--command-config`` file logging in as ``name`` (a user, or a token id with
        ``token``)."""
        path = self.root / f"{file}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.jaas.config={jaas(name, password, token)}\n")
        return path

    def tool(self, user: str, *args: str) -> tuple[int, str, str]:
        """``kafka-delegation-tokens`` as ``user`` (or with the ``user``.properties file
        already written): (exit code, stdout, stderr)."""
        config = self.properties(user, user, USERS[user]) if user in USERS else \
            self.root / f"{user}.properties"
        done = run_tool("kafka-delegation-tokens", "--bootstrap-server", self.sasl,
                        "--command-config", str(config), *args, timeout=120,
                        jvm_opts=tool_jvm_opts(install()))
        return done.returncode, done.stdout, done.stderr

    def produce_with_token(self, token_id: str, hmac: str, topic: str) -> str:
        """One record written by Kafka's Java producer logged in with the token: "ok", or
        the simple name of the exception it failed with."""
        events = java_clients.run({
            "op": "produce", "bootstrap": self.sasl, "topic": topic, "count": 1,
            "config": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.jaas.config": jaas(token_id, hmac, True), "acks": "all",
                       "max.block.ms": "20000", "request.timeout.ms": "10000",
                       "delivery.timeout.ms": "25000"}}, check=False)
        last = events[-1] if events else {"event": "error", "error": "no output"}
        if last["event"] == "error":
            return str(last["error"]).rsplit(".", 1)[-1]
        produced = next(e for e in events if e["event"] == "produced")
        if produced["errors"]:
            return str(produced["errors"][0]).split(":", 1)[0]
        return "ok" if produced["acked"] == 1 else f"acked {produced['acked']}"


def jaas(name: str, password: str, token: bool) -> str:
    extension = ' tokenauth="true"' if token else ""
    return f'{SCRAM_MODULE} required username="{name}" password="{password}"{extension};'


@dataclass
class Pair:
    kafka: System
    ottla: System

    def both(self, step: Callable[[System], T]) -> tuple[T, T]:
        """``step`` on Kafka and on Ottla at once: (Kafka's outcome, Ottla's)."""
        with ThreadPoolExecutor(2) as pool:
            on_kafka, on_ottla = pool.submit(step, self.kafka), pool.submit(step, self.ottla)
            return on_kafka.result(), on_ottla.result()


def prepare(system: System) -> None:
    """The SCRAM users, as the administrator."""
    admin = system.admin()
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
        for user, password in USERS.items()])
    for future in futures.values():
        future.result(30)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Iterator[Pair]:
    require_kafka()
    root: Path = tmp_path_factory.mktemp("tokens")
    kafka = single_node(root / "kafka")
    node = kafka.nodes[1]
    kafka_sasl = free_port()
    node.props.update(secured(node.port, node.controller_port, kafka_sasl))
    ottla = OttlaProcess(str(root / "ottla" / "data"))
    ottla_sasl = free_port()
    ottla.overrides = secured(ottla.port, ottla.controller_port, ottla_sasl)
    failure: list[BaseException] = []

    def start_kafka(cluster: KafkaCluster) -> None:
        try:
            cluster.start()
        except BaseException as e:  # raised below, once Ottla is up or has failed
            failure.append(e)
    (root / "ottla").mkdir()
    (root / "kafka-clients").mkdir()
    (root / "ottla-clients").mkdir()
    starter = threading.Thread(target=start_kafka, args=(kafka,))
    starter.start()
    try:
        ottla.start()
    except BaseException:
        starter.join()
        kafka.stop(check=False)
        raise
    starter.join()
    if failure:
        ottla.stop(check=False)
        raise failure[0]
    try:
        systems = Pair(
            System("kafka", node.bootstrap, f"127.0.0.1:{kafka_sasl}", root / "kafka-clients"),
            System("ottla", ottla.bootstrap, f"127.0.0.1:{ottla_sasl}", root / "ottla-clients"))
        systems.both(prepare)
        yield systems
    finally:
        try:
            ottla.stop()
        finally:
            kafka.stop()


def grant(system: System, topic: str, principal: str) -> None:
    admin = system.admin()
    futures = admin.create_topics([NewTopic(topic, 1, 1)])
    for future in futures.values():
        future.result(30)
    for future in admin.create_acls([
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                       operation, AclPermissionType.ALLOW)
            for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)]).values():
        future.result(30)


CREATED = re.compile(r"Created delegation token with tokenId : (\S+)")
DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d"


def token_rows(out: str) -> list[list[str]]:
    """The rows of the token table (the header aside)."""
    return [line.split() for line in out.splitlines()
            if line.strip() and not line.startswith(("TOKENID", "Calling", "Created",
                                                     "Total", "Completed"))]


def normalised(out: str, secrets: dict[str, str]) -> str:
    for value, name in secrets.items():
        out = out.replace(value, name)
    return re.sub(DATE, "<date>", out)


def test_a_token_authenticates_as_its_owner_until_it_is_expired(pair) -> None:
    topic, other = f"tokens-{uuid.uuid4().hex[:8]}", f"closed-{uuid.uuid4().hex[:8]}"

    def step(system: System) -> dict[str, Any]:
        grant(system, topic, "User:alice")
        grant(system, other, "User:bob")
        seen: dict[str, Any] = {}
        code, out, err = system.tool("alice", "--create", "--max-life-time-period", "-1",
                                     "--renewer-principal", "User:bob")
        found = CREATED.search(out)
        assert code == 0 and found, f"{system.name}: {out}\n{err[-2000:]}"
        token_id = found.group(1)
        [row] = token_rows(out)
        hmac = row[1]
        secrets = {token_id: "<token-id>", hmac: "<hmac>"}
        seen["create"] = normalised(out, secrets)
        assert row[2:5] == ["User:alice", "User:alice", "[User:bob]"]
        # the token logs in as alice: alice's ACLs apply
        seen["produce as the token"] = system.produce_with_token(token_id, hmac, topic)
        seen["produce where alice may not"] = system.produce_with_token(token_id, hmac, other)
        # a connection authenticated with a token may not create one
        system.properties("with-token", token_id, hmac, token=True)
        code, out, err = system.tool("with-token", "--create", "--max-life-time-period", "-1")
        seen["create with a token"] = (code, "UnsupportedByAuthenticationException" in err)
        # the renewer and a stranger describe alice's tokens
        for user in ("bob", "carol"):
            code, out, _ = system.tool(user, "--describe", "--owner-principal", "User:alice")
            seen[f"describe as {user}"] = (code, normalised(out, secrets))
        # a stranger may not renew; the renewer may
        code, _, err = system.tool("carol", "--renew", "--renew-time-period", "60000",
                                   "--hmac", hmac)
        seen["renew as carol"] = (code, "DelegationTokenOwnerMismatchException" in err)
        code, out, _ = system.tool("bob", "--renew", "--renew-time-period", "60000",
                                   "--hmac", hmac)
        seen["renew as bob"] = (code, normalised(out, secrets))
        # the owner expires it at once: it is gone, and no longer logs in
        code, out, _ = system.tool("alice", "--expire", "--expiry-time-period", "-1",
                                   "--hmac", hmac)
        seen["expire"] = (code, normalised(out, secrets))
        code, out, _ = system.tool("alice", "--describe", "--owner-principal", "User:alice")
        seen["describe after expiry"] = (code, normalised(out, secrets))
        seen["produce after expiry"] = system.produce_with_token(token_id, hmac, topic)
        code, _, err = system.tool("alice", "--renew", "--renew-time-period", "-1",
                                   "--hmac", hmac)
        seen["renew after expiry"] = (code, "DelegationTokenNotFoundException" in err)
        return seen

    kafka, ottla = pair.both(step)
    assert kafka["produce as the token"] == "ok"
    assert kafka["produce where alice may not"] == "TopicAuthorizationException"
    assert kafka["create with a token"] == (1, True)
    assert kafka["describe as bob"][1].count("<token-id>") == 1
    assert "Total number of tokens : 0" in kafka["describe as carol"][1]
    assert kafka["renew as carol"] == (1, True)
    assert kafka["renew as bob"][0] == 0 and kafka["expire"][0] == 0
    assert "Total number of tokens : 0" in kafka["describe after expiry"][1]
    assert kafka["produce after expiry"] == "SaslAuthenticationException"
    assert kafka["renew after expiry"] == (1, True)
    assert ottla == kafka


def test_the_expiry_sweep_removes_a_token_past_its_lifetime(pair) -> None:
    def step(system: System) -> tuple[str, str]:
        code, out, err = system.tool("alice", "--create", "--max-life-time-period", "1000")
        found = CREATED.search(out)
        assert code == 0 and found, f"{system.name}: {out}\n{err[-2000:]}"

        def swept() -> bool:
            code, out, _ = system.tool("alice", "--describe", "--owner-principal",
                                       "User:alice")
            return code == 0 and found.group(1) not in out
        # delegation.token.expiry.check.interval.ms is 1 s: the token lives 1 s more
        wait_until(swept, 60, 0.5, f"{system.name} to sweep token {found.group(1)}")
        [row] = token_rows(out)
        return system.produce_with_token(found.group(1), row[1], "any-topic"), "swept"

    kafka, ottla = pair.both(step)
    assert kafka == ("SaslAuthenticationException", "swept")
    assert ottla == kafka


def ottla_tool(system: System, user: str, *args: str) -> tuple[int, str, str]:
    """``ottla delegation-tokens`` as ``user``: (exit code, stdout, stderr)."""
    config = system.properties(user, user, USERS[user])
    done = subprocess.run([sys.executable, "-m", "ottla", "delegation-tokens",
                           "--bootstrap-server", system.sasl, "--command-config", str(config),
                           *args], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def test_ottla_delegation_tokens_prints_what_kafkas_tool_prints(pair) -> None:
    """Kafka's tool against Kafka, ``ottla delegation-tokens`` against Ottla: the same
    lines, token ids, HMACs and dates aside (the error: its first line, the exception)."""
    def step(system: System) -> list[tuple[int, str]]:
        tool = (lambda *a: system.tool(*a)) if system.name == "kafka" else \
            (lambda *a: ottla_tool(system, *a))
        code, out, err = tool("alice", "--create", "--max-life-time-period", "-1",
                              "--renewer-principal", "User:bob")
        found = CREATED.search(out)
        assert code == 0 and found, f"{system.name}: {out}\n{err[-2000:]}"
        hmac = token_rows(out)[0][1]
        secrets = {found.group(1): "<token-id>", hmac: "<hmac>"}
        outcomes = [(code, normalised(out, secrets))]
        for user, *args in (("bob", "--describe", "--owner-principal", "User:alice"),
                            ("bob", "--renew", "--renew-time-period", "60000", "--hmac", hmac),
                            ("alice", "--expire", "--expiry-time-period", "-1", "--hmac", hmac),
                            ("alice", "--describe", "--owner-principal", "User:alice")):
            code, out, _ = tool(user, *args)
            outcomes.append((code, normalised(out, secrets)))
        code, out, err = tool("alice", "--renew", "--renew-time-period", "-1", "--hmac", hmac)
        outcomes.append((code, normalised(out, secrets) + err.splitlines()[0]))
        return outcomes

    kafka, ottla = pair.both(step)
    assert [code for code, _ in kafka] == [0, 0, 0, 0, 0, 1]
    assert "Total number of tokens : 1" in kafka[1][1]
    assert kafka[5][1].endswith("org.apache.kafka.common.errors."
                                "DelegationTokenNotFoundException: Delegation Token is not "
                                "found on server.")
    assert ottla == kafka


def test_who_may_create_a_token_and_for_whom(pair) -> None:
    """Not on PLAINTEXT; renewers must be users; creating for another owner needs
    CREATE_TOKENS on that user (then the token names both)."""
    def step(system: System) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        plain = system.root / "plaintext.properties"
        plain.write_text("security.protocol=PLAINTEXT\n")
        done = run_tool("kafka-delegation-tokens", "--bootstrap-server", system.plaintext,
                        "--command-config", str(plain), "--create",
                        "--max-life-time-period", "-1", timeout=120,
                        jvm_opts=tool_jvm_opts(install()))
        seen["on PLAINTEXT"] = (done.returncode,
                                "UnsupportedByAuthenticationException" in done.stderr)
        code, _, err = system.tool("alice", "--create", "--max-life-time-period", "-1",
                                   "--renewer-principal", "Group:admins")
        seen["group renewer"] = (code, "InvalidPrincipalTypeException" in err)
        code, _, err = system.tool("carol", "--create", "--max-life-time-period", "-1",
                                   "--owner-principal", "User:alice")
        seen["for alice without CREATE_TOKENS"] = (
            code, "DelegationTokenAuthorizationException" in err)
        # confluent-kafka has no USER resource type: Kafka's own kafka-acls, as the admin
        run_tool("kafka-acls", "--bootstrap-server", system.plaintext, "--add",
                 "--allow-principal", "User:carol", "--operation", "CreateTokens",
                 "--user-principal", "User:alice", check=True, timeout=120,
                 jvm_opts=tool_jvm_opts(install()))

        def created() -> list[str] | None:
            code, out, _ = system.tool("carol", "--create", "--max-life-time-period", "-1",
                                       "--owner-principal", "User:alice")
            return token_rows(out)[0][2:4] if code == 0 else None
        # the ACL reaches the node's authorizer a moment after CreateAcls answers
        seen["for alice with CREATE_TOKENS"] = wait_until(
            created, 60, 0.5, f"{system.name} to let carol create a token for alice")
        return seen

    kafka, ottla = pair.both(step)
    assert kafka == {"on PLAINTEXT": (1, True), "group renewer": (1, True),
                     "for alice without CREATE_TOKENS": (1, True),
                     "for alice with CREATE_TOKENS": ["User:alice", "User:carol"]}
    assert ottla == kafka


def test_describe_tokens_on_the_owner_shows_its_tokens_to_another_user(pair) -> None:
    """A token is hidden from a user who neither owns nor renews it, until that user has
    DESCRIBE_TOKENS on the owner's User resource."""
    def step(system: System) -> tuple[int, int]:
        code, out, err = system.tool("bob", "--create", "--max-life-time-period", "-1")
        found = CREATED.search(out)
        assert code == 0 and found, f"{system.name}: {out}\n{err[-2000:]}"

        def seen_by_carol() -> int:
            code, out, _ = system.tool("carol", "--describe", "--owner-principal", "User:bob")
            assert code == 0, out
            return len([row for row in token_rows(out) if row[0] == found.group(1)])
        before = seen_by_carol()
        run_tool("kafka-acls", "--bootstrap-server", system.plaintext, "--add",
                 "--allow-principal", "User:carol", "--operation", "DescribeTokens",
                 "--user-principal", "User:bob", check=True, timeout=120,
                 jvm_opts=tool_jvm_opts(install()))
        # the ACL reaches the node's authorizer a moment after CreateAcls answers
        wait_until(seen_by_carol, 60, 0.5, f"{system.name} to show bob's token to carol")
        return before, seen_by_carol()

    kafka, ottla = pair.both(step)
    assert kafka == (0, 1)
    assert ottla == kafka


def test_tokens_survive_a_restart(tmp_path) -> None:
    """Tokens are metadata records: after a restart the node still describes the token
    and it still logs in as its owner (Ottla alone: Kafka's side of this is its log)."""
    node = OttlaProcess(str(tmp_path / "data"))
    sasl = free_port()
    node.overrides = secured(node.port, node.controller_port, sasl)
    node.start()
    try:
        system = System("ottla", node.bootstrap, f"127.0.0.1:{sasl}", tmp_path)
        prepare(system)
        topic = "after-restart"
        grant(system, topic, "User:alice")
        code, out, err = ottla_tool(system, "alice", "--create", "--max-life-time-period",
                                    "-1")
        found = CREATED.search(out)
        assert code == 0 and found, f"{out}\n{err}"
        token_id, hmac = found.group(1), token_rows(out)[0][1]
        node.stop()
        node.start()
        code, out, _ = ottla_tool(system, "alice", "--describe")
        assert code == 0 and token_id in out and hmac in out
        assert system.produce_with_token(token_id, hmac, topic) == "ok"
    finally:
        node.stop()
