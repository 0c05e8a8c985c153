"""Security state across controller failover (issue 31): SCRAM credentials, ACLs and
delegation tokens are metadata records, so losing the active controller loses none of
them. Three controllers and one broker, each its own ``ottla server``; the broker has a
SASL_PLAINTEXT listener with SCRAM-SHA-256 (and PLAINTEXT for the administrator,
``User:ANONYMOUS``, a super user as in Kafka's own tests), every node the
``StandardAuthorizer`` and ``delegation.token.secret.key``. Users are confluent-kafka
clients; a delegation token logs in through Kafka's Java producer (SCRAM with
``tokenauth="true"``, which librdkafka has no option for).

Expectations are Kafka's: a SCRAM user, an ACL or a token committed before the active
controller is killed -9 is enforced after the election as before; the new leader finds
them (it deletes the ACL and the credential, expires the token, sweeps away a token that
expires after the election) and what it changes is enforced; the killed controller,
restarted, catches up and describes the same ACLs and credentials on its own listener;
and when the second leader is killed too, the third finds everything its predecessors
wrote (it expires a token the first one created). One cluster, one test in phases; each
phase's time since the start is printed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from ottla.protocol.api import ApiKey
from tests import java_clients
from tests.helpers import KRaftCluster, WireClient, free_port, wait_until
from tests.kafka_tools import require_kafka

pytestmark = pytest.mark.slow

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
MECHANISM = "SCRAM-SHA-256"
ALICE, PASSWORD = "alice", "alice-secret"
OPEN, CLOSED = "alice-may-write", "alice-may-not"
COMMON = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS",
          "delegation.token.secret.key": "the-token-secret",
          "delegation.token.expiry.check.interval.ms": "1000"}
SHORT_LIFE_MS = 10_000
"""The maximum lifetime of a token created just before the failover: it outlives the old
leader, so only a new one can sweep it away."""


def secured_cluster(base: Path) -> tuple[KRaftCluster, str]:
    """The cluster (not started) and its broker's SASL_PLAINTEXT bootstrap address."""
    cluster = KRaftCluster(str(base), controllers=3, brokers=1, controller_props=COMMON)
    broker = cluster.broker()
    sasl = free_port()
    assert broker.config_file is not None
    lines = Path(broker.config_file).read_text().splitlines()
    props = dict(line.split("=", 1) for line in lines if "=" in line)
    props.update({
        **COMMON,
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners":
            f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISM,
        f"listener.name.sasl_plaintext.{MECHANISM.lower()}.sasl.jaas.config":
            f"{SCRAM_MODULE} required;",
        "num.partitions": "1",
    })
    Path(broker.config_file).write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return cluster, f"127.0.0.1:{sasl}"


def produce(sasl: str, user: str, password: str, topic: str) -> str:
    """One record produced by confluent-kafka logged in as ``user``: "ok", or the error
    the client saw (``_AUTHENTICATION`` for a refused login)."""
    errors: list[KafkaError] = []
    delivered: list[KafkaError | None] = []
    producer = Producer({
        "bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": MECHANISM, "sasl.username": user, "sasl.password": password,
        "acks": "all", "message.timeout.ms": 20000, "error_cb": errors.append})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: delivered.append(err))
    deadline = time.monotonic() + 25
    try:
        while not delivered and time.monotonic() < deadline:
            producer.poll(0.1)
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return "_AUTHENTICATION"
    finally:
        producer.purge()
        producer.flush(0)
    assert delivered, f"no delivery report for {user} on {topic} ({errors})"
    return "ok" if delivered[0] is None else delivered[0].name()


def produce_with_token(sasl: str, token_id: str, hmac: str, topic: str) -> str:
    """One record written by Kafka's Java producer logged in with the token: "ok", or
    the simple name of the exception it failed with."""
    jaas = f'{SCRAM_MODULE} required username="{token_id}" password="{hmac}" tokenauth="true";'
    events = java_clients.run({
        "op": "produce", "bootstrap": sasl, "topic": topic, "count": 1,
        "config": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM,
                   "sasl.jaas.config": jaas, "acks": "all", "max.block.ms": "20000",
                   "request.timeout.ms": "10000", "delivery.timeout.ms": "25000"}},
        check=False)
    last = events[-1] if events else {"event": "error", "error": "no output"}
    if last["event"] == "error":
        return str(last["error"]).rsplit(".", 1)[-1]
    produced = next(e for e in events if e["event"] == "produced")
    if produced["errors"]:
        return str(produced["errors"][0]).split(":", 1)[0]
    return "ok" if produced["acked"] == 1 else f"acked {produced['acked']}"


def created_token(output: str) -> tuple[str, str]:
    """The id and HMAC in ``ottla delegation-tokens --create``'s output (alice's)."""
    [row] = [line.split() for line in output.splitlines()
             if line.strip() and not line.startswith(("TOKENID", "Calling", "Created"))]
    assert row[2:4] == [f"User:{ALICE}", f"User:{ALICE}"], output
    return row[0], row[1]


def tokens_tool(sasl: str, config: Path, *args: str) -> str:
    """``ottla delegation-tokens`` logged in as alice; its output (it must succeed)."""
    done = subprocess.run([sys.executable, "-m", "ottla", "delegation-tokens",
                           "--bootstrap-server", sasl, "--command-config", str(config),
                           *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def set_password(admin: AdminClient, password: str | None) -> None:
    """Upsert alice's SCRAM-SHA-256 credential, or delete it (``None``)."""
    change = UserScramCredentialDeletion(ALICE, ScramMechanism.SCRAM_SHA_256) \
        if password is None else UserScramCredentialUpsertion(
            ALICE, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode())
    for future in admin.alter_user_scram_credentials([change]).values():
        future.result(30)


def allow_alice(admin: AdminClient, topic: str) -> None:
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                           f"User:{ALICE}", "*", operation, AclPermissionType.ALLOW)
                for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for future in admin.create_acls(bindings).values():
        future.result(30)


def forbid_alice_writing(admin: AdminClient, topic: str) -> list[AclBinding]:
    """Delete alice's WRITE on ``topic``: the bindings the controller deleted."""
    binding = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                               f"User:{ALICE}", "*", AclOperation.WRITE,
                               AclPermissionType.ALLOW)
    return admin.delete_acls([binding])[binding].result(30)


def seen_by(cluster: KRaftCluster, controller: int) -> tuple[set[tuple[str, int]],
                                                              list[tuple[int, int]]]:
    """alice's topic ACLs (topic, operation code) and SCRAM credentials (mechanism code,
    iterations) as the controller ``controller`` itself describes them, on its own
    listener as the super user."""
    with WireClient(cluster.nodes[controller].controller, timeout=5) as client:
        acls = client.request(ApiKey.DESCRIBE_ACLS, 3, {
            "resource_type_filter": 2, "resource_name_filter": None,  # TOPIC
            "pattern_type_filter": 1, "principal_filter": f"User:{ALICE}",  # ANY
            "host_filter": None, "operation": 1, "permission_type": 1})  # ANY, ANY
        scram = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                               {"users": [{"name": ALICE}]})
    assert acls.error_code == 0 and scram.error_code == 0, (acls, scram)
    [user] = scram.results
    return ({(r.resource_name, a.operation) for r in acls.resources for a in r.acls},
            [(c.mechanism, c.iterations) for c in user.credential_infos])


def kill_the_leader(cluster: KRaftCluster) -> tuple[int, int]:
    """kill -9 the active controller and wait for another to be elected: (killed, new)."""
    leader = cluster.leader()
    before = cluster.describe_quorum().leader_epoch
    cluster.nodes[leader].kill9()

    def elected() -> int | None:
        q = cluster.describe_quorum()
        return q.leader_id if q.leader_id not in (-1, leader) and q.leader_epoch > before \
            else None
    return leader, wait_until(elected, 30, 0.1, "a new active controller")


def test_security_state_survives_losing_the_active_controller(tmp_path: Path) -> None:
    require_kafka()
    java_clients.classpath()  # compiled before the clock matters
    cluster, sasl = secured_cluster(tmp_path)
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = round(time.monotonic() - started, 1)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 5000})
        phase("started")

        # 1. alice, her ACLs on one topic (none on the other), a token she owns
        for future in admin.create_topics([NewTopic(OPEN, 1, 1), NewTopic(CLOSED, 1, 1)],
                                          operation_timeout=20).values():
            future.result(30)
        set_password(admin, PASSWORD)
        allow_alice(admin, OPEN)
        # the credential and ACLs reach the broker a moment after the admin calls answer
        wait_until(lambda: produce(sasl, ALICE, PASSWORD, OPEN) == "ok", 30, 0.5,
                   "alice to produce to the topic she may write")
        config = tmp_path / "alice.properties"
        config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={MECHANISM}\n"
                          f"sasl.jaas.config={SCRAM_MODULE} required username=\"{ALICE}\" "
                          f"password=\"{PASSWORD}\";\n")
        token_id, hmac = created_token(
            tokens_tool(sasl, config, "--create", "--max-life-time-period", "-1"))
        short_lived, _ = created_token(tokens_tool(
            sasl, config, "--create", "--max-life-time-period", str(SHORT_LIFE_MS)))
        kept, kept_hmac = created_token(
            tokens_tool(sasl, config, "--create", "--max-life-time-period", "-1"))
        # (listed: the broker has them; the short-lived one outlives the old leader)
        wait_until(lambda: {token_id, short_lived, kept} <= set(
            tokens_tool(sasl, config, "--describe").split()), 10, 0.2,
            "the broker to list alice's three tokens")
        phase("state created")

        # 2. the active controller dies
        killed, elected = kill_the_leader(cluster)
        phase(f"controller {killed} killed, {elected} elected")

        # 3. everything committed before is enforced as before
        assert produce(sasl, ALICE, PASSWORD, OPEN) == "ok"
        assert produce(sasl, ALICE, PASSWORD, CLOSED) == "TOPIC_AUTHORIZATION_FAILED"
        assert produce(sasl, ALICE, "not-her-password", OPEN) == "_AUTHENTICATION"
        assert produce_with_token(sasl, token_id, hmac, OPEN) == "ok"
        assert produce_with_token(sasl, token_id, hmac, CLOSED) == \
            "TopicAuthorizationException"
        phase("enforced after failover")
        # the new leader sweeps away the token that expired after the old one died
        wait_until(lambda: short_lived not in tokens_tool(sasl, config, "--describe"),
                   SHORT_LIFE_MS / 1000 + 20, 0.5,
                   f"the new leader to sweep the expired token {short_lived}")
        assert token_id in tokens_tool(sasl, config, "--describe")
        phase("expired token swept by the new leader")

        # 4. changes through the new leader are enforced: an ACL added, one made before
        # the failover deleted (the new leader finds it), the token expired, alice's
        # credential deleted (her token is hers, not her password's)
        allow_alice(admin, CLOSED)
        assert len(forbid_alice_writing(admin, OPEN)) == 1
        wait_until(lambda: produce(sasl, ALICE, PASSWORD, CLOSED) == "ok", 30, 0.5,
                   "alice to produce to the topic she was just allowed")
        wait_until(lambda: produce(sasl, ALICE, PASSWORD, OPEN) ==
                   "TOPIC_AUTHORIZATION_FAILED", 30, 0.5,
                   "alice to be refused the topic she may no longer write")
        tokens_tool(sasl, config, "--expire", "--expiry-time-period", "-1", "--hmac", hmac)
        set_password(admin, None)
        wait_until(lambda: produce(sasl, ALICE, PASSWORD, OPEN) == "_AUTHENTICATION", 30,
                   0.5, "alice's deleted credential to be refused")
        assert produce_with_token(sasl, token_id, hmac, OPEN) == "SaslAuthenticationException"
        phase("changes on the new leader enforced")

        # 5. the killed controller comes back, catches up (lag 0), and holds what was
        # written while it was down
        cluster.nodes[killed].start(wait=True)

        def caught_up() -> bool:
            q = cluster.describe_quorum()
            ends = {v.replica_id: v.log_end_offset for v in q.current_voters}
            return q.leader_id == elected and ends[killed] >= q.high_watermark
        wait_until(caught_up, 30, 0.2, f"controller {killed} to catch up with {elected}")
        write, describe = AclOperation.WRITE.value, AclOperation.DESCRIBE.value
        acls = {(OPEN, describe), (CLOSED, write), (CLOSED, describe)}
        # (what it has caught up with it applies once it learns it is committed)
        wait_until(lambda: seen_by(cluster, killed) == (acls, []), 10, 0.2,
                   lambda: f"controller {killed} to hold {acls} and no credential: "
                           f"{seen_by(cluster, killed)}")
        set_password(admin, "her-new-secret")
        wait_until(lambda: seen_by(cluster, killed) == (acls, [(1, 4096)]), 30, 0.2,
                   f"controller {killed} to replay alice's new credential")  # SHA-256
        wait_until(lambda: produce(sasl, ALICE, "her-new-secret", CLOSED) == "ok", 30, 0.5,
                   "alice to log in with her new password")
        assert produce(sasl, ALICE, PASSWORD, CLOSED) == "_AUTHENTICATION"
        assert produce(sasl, ALICE, "her-new-secret", OPEN) == "TOPIC_AUTHORIZATION_FAILED"
        assert produce_with_token(sasl, token_id, hmac, CLOSED) == \
            "SaslAuthenticationException"
        phase(f"controller {killed} caught up")

        # 6. the second leader dies too: whichever of the other two is elected finds
        # the ACLs, credential and token made through its predecessors
        second, third = kill_the_leader(cluster)
        phase(f"controller {second} killed, {third} elected")
        wait_until(lambda: seen_by(cluster, third) == (acls, [(1, 4096)]), 10, 0.2,
                   lambda: f"controller {third} to hold {acls} and alice's credential: "
                           f"{seen_by(cluster, third)}")
        # a token made through the first leader, expired through the third
        assert produce_with_token(sasl, kept, kept_hmac, CLOSED) == "ok"
        config.write_text(config.read_text().replace(PASSWORD, "her-new-secret"))
        tokens_tool(sasl, config, "--expire", "--expiry-time-period", "-1", "--hmac",
                    kept_hmac)
        wait_until(lambda: produce_with_token(sasl, kept, kept_hmac, CLOSED) ==
                   "SaslAuthenticationException", 30, 0.5,
                   f"the token {kept} expired through controller {third} to be refused")
        assert len(forbid_alice_writing(admin, CLOSED)) == 1
        wait_until(lambda: produce(sasl, ALICE, "her-new-secret", CLOSED) ==
                   "TOPIC_AUTHORIZATION_FAILED", 30, 0.5,
                   "alice to be refused the topic she may no longer write")
        set_password(admin, None)
        wait_until(lambda: produce(sasl, ALICE, "her-new-secret", CLOSED) == "_AUTHENTICATION",
                   30, 0.5, "alice's deleted credential to be refused")
        phase("changes on the third leader enforced")
        print(f"phases (s since start): {phases}")
    finally:
        cluster.stop()
