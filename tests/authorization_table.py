"""Which authorization checks Apache Kafka 4.x performs for every API it serves on a broker
listener and on a controller listener, and what a client sees when a check fails: written down
from Kafka's sources as data, for a table-driven test (a principal with no ACLs, then with
exactly the ACLs listed here) and for the authorization in Ottla's handlers.

Sources
-------
- Read: apache/kafka's 4.2 branch at 18d5ecd939c8d510fdd72d0abb1f7099659dcd58 ("Bump version
  to 4.2.1", 2026-05-13; an upstream commit, read from the aiven/inkless mirror that carries
  the branch). Every ``source`` string below is ``<file>:<line> <function>`` of that tree.
  The apache/kafka snapshot the store had (1eb7644, Oct 2024, 4.0.0-SNAPSHOT) was too old to
  have the share, streams and KIP-1071 handlers as shipped, so it was used for nothing else
  than to confirm that Produce has no IDEMPOTENT_WRITE check there either.
- Checked against Kafka 4.4.0 (the version Ottla follows, ``tests/kafka_versions.py``): the
  4.4.0 release jars in ``~/.cache/ottla/kafka-4.4.0/libs`` disassembled with ``javap -c``.
  Every handler of ``KafkaApis``, ``ControllerApis``, ``AclApis``, ``ConfigHelper``,
  ``ConfigAdminManager``, ``AuthHelper``, ``DescribeTopicPartitionsRequestHandler``,
  ``AclEntry``, ``StandardAuthorizerData`` and the group coordinator's ``TopicRegexResolver``
  references the same operations, resource types and error codes (compared method by method)
  as the 4.2.1 source, except where an entry says "4.4" (new APIs 93 and 94; a null group id
  check in ShareFetch/ShareAcknowledge; the broker-side CLUSTER check of BROKER configs in
  AlterConfigs/IncrementalAlterConfigs; topic ids in TxnOffsetCommit v6).
- Listeners and API keys: ``clients/src/main/resources/common/message/*Request.json`` of the
  4.4.0 clients jar (``listeners``), and ``ApiKeys`` 4.4.0 (``forwardable``).
- Request/response field paths are the snake_case names of those JSON files (kio's names);
  ``[]`` marks an array. ``cluster`` names the CLUSTER resource, always ``kafka-cluster``.
- Cross-checked with the docs table "Operations and Resources on Protocols"
  (``docs/security/authorization-and-acls.md``); where it disagrees with the code the code is
  written here and the disagreement is listed in ``DOCS_DISAGREE``.

Rules that apply everywhere
---------------------------
- Authorization is ``AuthHelper.authorize``: one ``Action(op, LITERAL resource)`` asked of the
  configured authorizer (``authorizer.class.name``, in KRaft ``StandardAuthorizer``). With no
  authorizer every check passes and ``authorizedOperations`` reports every supported operation
  (``SUPPORTED_OPERATIONS``); only the ACL APIs then answer SECURITY_DISABLED (54).
- ``StandardAuthorizer``: a principal listed in ``super.users`` is allowed everything; a DENY
  ACL that matches wins over any ALLOW; with no matching ACL the result is DENIED unless
  ``allow.everyone.if.no.acl.found=true``. ACLs match the principal itself or ``User:*`` and the
  client host or ``*``; resource patterns LITERAL, ``*`` and PREFIXED. An ALLOW ACL for an
  operation in ``IMPLIED_BY[op]`` also allows ``op`` (READ/WRITE/DELETE/ALTER allow DESCRIBE;
  ALTER_CONFIGS allows DESCRIBE_CONFIGS); ALL allows everything. A DENY ACL denies only its own
  operation (or everything, for ALL): a DENY READ does not deny DESCRIBE. CREATE does not imply
  DESCRIBE.
- ``authorizeByResourceType(op, type)`` (only InitProducerId uses it, WRITE on TOPIC): allowed
  if the principal may ``op`` a resource literally named ``hardcode`` (so super users and
  ``allow.everyone.if.no.acl.found`` pass), else if some ALLOW ACL of the principal (or
  ``User:*``, host matching) for exactly ``op`` or ALL on that resource type, LITERAL or
  PREFIXED with any name, is not dominated by a DENY: a LITERAL ALLOW by a LITERAL DENY of the
  same name, any ALLOW by a PREFIXED DENY of a prefix of (or equal to) its name. A LITERAL
  ``*`` DENY denies and a LITERAL ``*`` ALLOW allows, whatever else. No implied operations.
- ApiVersions, SaslHandshake and SaslAuthenticate need nothing, on both listeners (after
  authentication SaslHandshake/SaslAuthenticate answer ILLEGAL_SASL_STATE, 34).
- A check made with ``authHelper.authorizeClusterOperation`` throws; ``handleError`` then sends
  ``request.getErrorResponse(e)``, which for most requests is a top-level error, but for some
  copies the error into every entry (``Failure.EVERY_ENTRY``). The message, where the response
  has one that takes the exception's message, is ``MSG_NEEDS_PERMISSION`` with Kafka's
  ``RequestChannel.Request.toString`` in it (not meant to be compared verbatim).
- Errors built from ``Errors.X.exception`` or ``new ApiError(X)`` carry ``Errors.X.message``
  (``MSG_*`` below); per-entry errors set without a message leave it null.
- Forwarding (``Mode.FORWARDED``): the broker listener does the pre-forward checks listed (most
  APIs have none), then ``ForwardingManager`` wraps the request in an Envelope (API 58) to the
  active controller: ``request_data`` the client's request bytes, ``request_principal`` the
  client's principal serialized by the listener's ``KafkaPrincipalSerde``
  (``DefaultPrincipalData``: type, name, token_authenticated), ``client_host_address`` the
  client's address. The controller first authorizes the Envelope itself: CLUSTER_ACTION on
  CLUSTER for the *broker's* principal (the connection's); then ``EnvelopeUtils`` rebuilds the
  request with the *client's* principal and address (listener name and security protocol stay
  those of the broker-controller connection) and runs it through ``ControllerApis.handle``, so
  every check of that API's CONTROLLER handling below is made against the client's principal
  (and its host, for host-restricted ACLs). An inner API that is not forwardable
  (``FORWARDABLE``) fails the Envelope with INVALID_REQUEST; a principal that cannot be
  deserialized fails it with PRINCIPAL_DESERIALIZATION_FAILURE (97). The controller's
  answer goes back inside the EnvelopeResponse and the broker returns it to the client as is;
  an error in the Envelope itself (for instance CLUSTER_AUTHORIZATION_FAILED because the
  broker's principal lacks CLUSTER_ACTION) reaches the client as UNKNOWN_SERVER_ERROR (-1)
  through the request's ``getErrorResponse``; UNSUPPORTED_VERSION closes the client connection.
- The broker also sends Envelopes on its own: topic auto-creation for Metadata and the
  internal topics of StreamsGroupHeartbeat go to the controller as CreateTopics inside an
  Envelope carrying the client's principal (so the controller checks CREATE again); the
  internal topics FindCoordinator creates go as a plain CreateTopics with the broker's own
  principal.
- APIs 4-7 (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) have no listener in
  4.x and are not served (``NOT_SERVED``).

Shape of the data
-----------------
``APIS`` lists one ``Api`` per API key served on some listener, with one ``Handling`` per
listener. A ``Handling``'s ``checks`` are in the order Kafka makes them; a ``Check`` passes
when any of its ``Grant``s is allowed (``any_of``, tried in order: CreateTopics' CREATE on
CLUSTER, else CREATE on the topic). ``Check.when`` says when it applies, ``failure`` how a
denial shows (``Failure``), ``error``/``where``/``message`` what the client reads.
``preconditions`` are the non-ACL conditions Kafka tests before (or between) the checks, with
the error they give. ``authorized_ops`` describes the ``*authorized_operations`` fields.
``certain=False`` marks what could not be settled from the code read.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

# --- Vocabulary -----------------------------------------------------------------------------


class Listener(StrEnum):
    """The listener a request arrives on (``ApiMessageType.ListenerType``)."""

    BROKER = "broker"
    CONTROLLER = "controller"


class Op(IntEnum):
    """``org.apache.kafka.common.acl.AclOperation`` with its wire code (the bit it sets in an
    ``authorized_operations`` field)."""

    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Res(IntEnum):
    """``org.apache.kafka.common.resource.ResourceType`` with its wire code."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Err(IntEnum):
    """The ``Errors`` codes this table mentions."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_TOPIC_EXCEPTION = 17
    INCONSISTENT_GROUP_PROTOCOL = 23
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    TOPIC_DELETION_DISABLED = 73
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    UNKNOWN_TOPIC_ID = 100
    STREAMS_INVALID_TOPOLOGY = 130


class Failure(StrEnum):
    """How a denied check shows in the response."""

    TOP_LEVEL = "top_level"
    """Nothing of the request is done; the response's top-level error code says why (where a
    response also has entries, ``where`` says what they hold)."""
    EVERY_ENTRY = "every_entry"
    """Nothing of the request is done; the error is copied into every entry (partition, topic,
    resource, result) of the response."""
    PER_ENTRY = "per_entry"
    """Only the entries naming the denied resource carry the error; the rest is served."""
    FILTERED = "filtered"
    """Denied resources are silently left out of the response; no error anywhere."""
    WITHHELD = "withheld"
    """The request is served, but some data is withheld or marked (see ``where``/``note``)."""


class Mode(StrEnum):
    """How a listener handles an API."""

    LOCAL = "local"
    """Authorized and served by the node that received it."""
    FORWARDED = "forwarded"
    """Broker listener only: after this handling's own ``checks`` (pre-forward, usually none)
    the request is forwarded in an Envelope; the API's CONTROLLER handling then applies, with
    the client's principal (see the module docstring)."""
    UNHANDLED = "unhandled"
    """Advertised on this listener (the request JSON lists it) but the handler has no case for
    it: no check, the answer is ``getErrorResponse(UNKNOWN_SERVER_ERROR)``."""


CLUSTER = "cluster"
"""``Grant.name`` of the CLUSTER resource, whose only name is ``kafka-cluster``."""
ANY_NAME = "<any>"
"""``Grant.name`` of an ``authorizeByResourceType`` check."""
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""Default of every ``*authorized_operations`` field: not asked for, or not computed."""

MSG_TOPIC = "Topic authorization failed."
MSG_GROUP = "Group authorization failed."
MSG_CLUSTER = "Cluster authorization failed."
MSG_TXN = "Transactional Id authorization failed."
MSG_NEEDS_PERMISSION = "Request {request} needs {operation} permission."
"""``AuthHelper.authorizeClusterOperation``'s ``ClusterAuthorizationException`` message:
``{request}`` is Kafka's ``RequestChannel.Request.toString`` (processor, connection id,
session, listener, security protocol, buffer, envelope), ``{operation}`` the AclOperation name
(``ALTER``). A response that takes the exception's message shows it."""


@dataclass(frozen=True)
class Grant:
    """One authorization question: may the principal ``op`` the ``resource`` named ``name``?

    ``name`` is the request field path that names the resource (``topic_data[].name``), with
    the versions it applies to where they matter; ``CLUSTER`` for the cluster;
    ``response:<path>`` when Kafka checks names it found itself (a filter on the response);
    ``ANY_NAME`` with ``by_resource_type`` for ``authorizeByResourceType``."""

    op: Op
    resource: Res
    name: str = CLUSTER
    by_resource_type: bool = False


@dataclass(frozen=True)
class Check:
    """One authorization step. It passes when any of ``any_of`` is allowed, tried in order
    (for a per-entry check: for each entry on its own)."""

    any_of: tuple[Grant, ...]
    failure: Failure
    error: Err | None
    """What a denial sets; None for ``FILTERED``."""
    where: str = ""
    """The response field(s) that carry ``error``."""
    message: str | None = None
    """The error message Kafka sets with it; None: null, or the response has no message."""
    when: str = ""
    """When the check is made; empty: always."""
    note: str = ""
    certain: bool = True


@dataclass(frozen=True)
class AuthorizedOps:
    """An ``*authorized_operations`` field: the 32-bit set of ``Op`` codes the principal is
    allowed on a resource (``AuthHelper.authorizedOperations``: every operation of
    ``SUPPORTED_OPERATIONS[resource]`` asked of the authorizer, logging off), filled in when
    ``requested_by`` asks for it; otherwise it stays ``AUTHORIZED_OPERATIONS_OMITTED``."""

    field: str
    resource: Res
    name: str
    """The response field naming the resource."""
    requested_by: str
    """The request flag that asks for it, or ``always``."""
    gate: Grant | None = None
    """If set, asked first; denied: the field is 0 instead of the set."""
    note: str = ""
    certain: bool = True


@dataclass(frozen=True)
class Handling:
    """What one listener does with an API."""

    listener: Listener
    mode: Mode
    checks: tuple[Check, ...] = ()
    preconditions: tuple[str, ...] = ()
    authorized_ops: tuple[AuthorizedOps, ...] = ()
    source: str = ""
    note: str = ""
    certain: bool = True


@dataclass(frozen=True)
class Api:
    """One API key and how each listener that serves it authorizes it."""

    key: int
    name: str
    """``ApiKeys`` name."""
    handlings: tuple[Handling, ...]
    note: str = ""

    @property
    def listeners(self) -> tuple[Listener, ...]:
        return tuple(h.listener for h in self.handlings)

    def on(self, listener: Listener) -> Handling | None:
        """This API's handling on ``listener``, or None if that listener does not serve it."""
        return next((h for h in self.handlings if h.listener is listener), None)


# --- Authorizer facts -----------------------------------------------------------------------

IMPLIED_BY: dict[Op, frozenset[Op]] = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
}
"""ALLOW ACLs whose operation also allows the key (``StandardAuthorizerData.IMPLIES_DESCRIBE``,
``IMPLIES_DESCRIBE_CONFIGS``, ``findResult``, StandardAuthorizerData.java:436-522). Every other
operation is allowed only by an ACL for itself or for ALL. DENY ACLs imply nothing."""

SUPPORTED_OPERATIONS: dict[Res, tuple[Op, ...]] = {
    Res.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Res.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Res.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                  Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    Res.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT),
    Res.DELEGATION_TOKEN: (Op.DESCRIBE,),
    Res.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}
"""``AclEntry.supportedOperations`` (server/.../security/authorizer/AclEntry.java:53): the
operations an ``authorized_operations`` field can report for each resource type."""

FORWARDABLE: frozenset[str] = frozenset({
    "CREATE_TOPICS", "DELETE_TOPICS", "CREATE_ACLS", "DELETE_ACLS", "ALTER_CONFIGS",
    "CREATE_PARTITIONS", "CREATE_DELEGATION_TOKEN", "RENEW_DELEGATION_TOKEN",
    "EXPIRE_DELEGATION_TOKEN", "ELECT_LEADERS", "INCREMENTAL_ALTER_CONFIGS",
    "ALTER_PARTITION_REASSIGNMENTS", "LIST_PARTITION_REASSIGNMENTS", "ALTER_CLIENT_QUOTAS",
    "ALTER_USER_SCRAM_CREDENTIALS", "DESCRIBE_QUORUM", "UPDATE_FEATURES", "UNREGISTER_BROKER",
    "ALLOCATE_PRODUCER_IDS", "ADD_RAFT_VOTER", "REMOVE_RAFT_VOTER", "UNREGISTER_CONTROLLER",
})
"""``ApiKeys.forwardable`` in 4.4.0: what an Envelope may carry (``EnvelopeUtils`` rejects the
rest with INVALID_REQUEST)."""

NOT_SERVED: dict[int, str] = {
    4: "LEADER_AND_ISR", 5: "STOP_REPLICA", 6: "UPDATE_METADATA", 7: "CONTROLLED_SHUTDOWN",
}
"""ZooKeeper-era inter-broker APIs: in ``ApiKeys`` but in no listener's scope in 4.x."""

DOCS_DISAGREE: tuple[str, ...] = (
    "PRODUCE: the docs list IDEMPOTENT_WRITE on CLUSTER for idempotent produce; neither 4.0,"
    " 4.2 nor 4.4 checks it in handleProduceRequest (InitProducerId does).",
    "INIT_PRODUCER_ID: the docs list IDEMPOTENT_WRITE on CLUSTER, not that WRITE on any topic"
    " (authorizeByResourceType) suffices instead, nor TWO_PHASE_COMMIT for enable2_pc.",
    "ELECT_LEADERS: the docs say CLUSTER_ACTION on CLUSTER; ControllerApis.handleElectLeaders"
    " checks ALTER on CLUSTER.",
    "CONSUMER_GROUP_DESCRIBE: the docs say READ on GROUP; the code checks DESCRIBE on GROUP"
    " and DESCRIBE on the assigned topics.",
    "CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE: not in the docs:"
    " DESCRIBE on the subscribed (heartbeat) or assigned (describe) topics.",
    "DESCRIBE_CLUSTER: the docs say DESCRIBE on CLUSTER; the broker checks nothing (DESCRIBE"
    " only gates cluster_authorized_operations) and the controller needs ALTER on CLUSTER.",
    "DELETE_TOPICS: the docs list only DELETE on TOPIC; the controller also checks DESCRIBE"
    " (implied by DELETE) and accepts DELETE on CLUSTER for every topic.",
    "CREATE_TOPICS: not in the docs: DESCRIBE_CONFIGS on the topic decides whether the created"
    " topic's configs are returned (topic_config_error_code 29 otherwise).",
    "DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS: the docs name only broker and"
    " topic configs; GROUP configs need *_CONFIGS on the GROUP, CLIENT_METRICS and"
    " BROKER_LOGGER on the CLUSTER, and a BROKER_LOGGER change sent to the controller needs"
    " CLUSTER_ACTION.",
    "DESCRIBE_TRANSACTIONS: not in the docs: the partitions of a described transaction are"
    " filtered by DESCRIBE on their topics.",
    "WRITE_TXN_MARKERS: the docs list ALTER and CLUSTER_ACTION on CLUSTER; either suffices.",
)

# --- Source locations (4.2.1 tree) ------------------------------------------------------------

KA = "core/src/main/scala/kafka/server/KafkaApis.scala"
CA = "core/src/main/scala/kafka/server/ControllerApis.scala"
ACL = "core/src/main/scala/kafka/server/AclApis.scala"
AUTH = "core/src/main/scala/kafka/server/AuthHelper.scala"
CFG = "core/src/main/scala/kafka/server/ConfigHelper.scala"
CAM = "core/src/main/scala/kafka/server/ConfigAdminManager.scala"
DTP = "core/src/main/java/kafka/server/handlers/DescribeTopicPartitionsRequestHandler.java"
RCM = "metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java"
DTCM = "metadata/src/main/java/org/apache/kafka/controller/DelegationTokenControlManager.java"
GMM = "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java"
ENV = "core/src/main/scala/kafka/server/EnvelopeUtils.scala"
FWD = "core/src/main/scala/kafka/server/ForwardingManager.scala"

# --- Reusable pieces --------------------------------------------------------------------------

CLUSTER_ACTION = Grant(Op.CLUSTER_ACTION, Res.CLUSTER)
CLUSTER_ALTER = Grant(Op.ALTER, Res.CLUSTER)
CLUSTER_DESCRIBE = Grant(Op.DESCRIBE, Res.CLUSTER)

BROKER_FORWARDED = Handling(
    Listener.BROKER, Mode.FORWARDED,
    source=f"{KA}:130 forwardToController; {FWD}:123 forwardRequest",
    note="No check on the broker; the controller's checks apply with the client's principal.",
)


def _inter_node(operation: Op, failure: Failure = Failure.TOP_LEVEL, where: str = "error_code",
                message: str | None = None) -> Check:
    """A cluster-level check of an inter-node or admin API (``authorizeClusterOperation``)."""
    return Check((Grant(operation, Res.CLUSTER),), failure, Err.CLUSTER_AUTHORIZATION_FAILED,
                 where, message)


CLUSTER_CONFIG_TYPES = "resource_type BROKER (4), BROKER_LOGGER (8) or CLIENT_METRICS (16)"
SHARE_ENABLED = ("share groups enabled (group.share.enable or share.version >= 1), else the"
                 " request's getErrorResponse(UNSUPPORTED_VERSION), before any check")
DESCRIBED_TOPIC_NOTE = (
    "Only with an authorizer configured. Computed after authorized_operations, so a replaced"
    " group keeps authorized_operations -2147483648.")

# --- The table --------------------------------------------------------------------------------

APIS: tuple[Api, ...] = (
    Api(0, "PRODUCE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
                    Failure.EVERY_ENTRY, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "responses[].partition_responses[].error_code, .error_message",
                    MSG_TXN,
                    when="any record batch has the transactional flag",
                    note="A null transactional_id with transactional batches fails the same"
                    " way; a transactional_id with only non-transactional batches is not"
                    " checked. With acks=0 ProduceRequest.getErrorResponse is null: the broker"
                    " closes the connection instead of answering.",
                ),
                Check(
                    (Grant(Op.WRITE, Res.TOPIC,
                           "topic_data[].name (v13+: topic_data[].topic_id, resolved)"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].partition_responses[].error_code",
                    note="Per topic, reported for each of its partitions. v13+: an unknown"
                    " topic_id is UNKNOWN_TOPIC_ID (100) before this check. An authorized topic"
                    " that does not exist is UNKNOWN_TOPIC_OR_PARTITION (3) after it. With"
                    " acks=0 any partition error closes the connection. No IDEMPOTENT_WRITE"
                    " check for idempotent batches (see DOCS_DISAGREE).",
                ),
            ),
            source=f"{KA}:388 handleProduceRequest",
        ),
    )),
    Api(1, "FETCH", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (CLUSTER_ACTION,), Failure.EVERY_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].partitions[].error_code",
                    when="from a follower: replica_id >= 0 (v15+: replica_state.replica_id)",
                    note="A follower without CLUSTER_ACTION gets TOPIC_AUTHORIZATION_FAILED (not"
                    " CLUSTER_AUTHORIZATION_FAILED) for every partition of the fetch session;"
                    " top-level error_code stays 0.",
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC,
                           "topics[].topic (v13+: topics[].topic_id, resolved)"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].partitions[].error_code",
                    when="from a consumer: replica_id < 0",
                    note="Every partition of the fetch context (incremental sessions included)."
                    " v13+: a topic_id unknown to the broker is UNKNOWN_TOPIC_ID (100) before"
                    " this check; an authorized partition the broker does not know is"
                    " UNKNOWN_TOPIC_OR_PARTITION (3) after it.",
                ),
            ),
            source=f"{KA}:555 handleFetchRequest",
        ),
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ACTION,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code (v4-12 also every responses[].partitions[].error_code)",
                note="KRaft replication of __cluster_metadata; FetchRequest.getErrorResponse.",
            ),),
            source=f"{CA}:189 handleFetch",
        ),
    )),
    Api(2, "LIST_OFFSETS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DESCRIBE, Res.TOPIC, "topics[].name"),),
                Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                "topics[].partitions[].error_code (timestamp -1, offset -1)",
                note="Per topic, for each of its partitions. replica_id is not authorized.",
            ),),
            source=f"{KA}:773 handleListOffsetRequest",
        ),
    )),
    Api(3, "METADATA", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC,
                           "topics[].name (v12+: or topics[].topic_id, resolved)"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].error_code",
                    when="topics named in the request",
                    note="The entry has no partitions, is_internal false, and by name topic_id"
                    " zero / by id name null (the id is echoed). Existence is not checked, so a"
                    " missing topic and a forbidden one look alike. An unknown topic_id is"
                    " UNKNOWN_TOPIC_ID (100) whatever the ACLs.",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:topics[].name"),),
                    Failure.FILTERED, None,
                    when="all topics: topics null (v0: topics empty)",
                ),
                Check(
                    (Grant(Op.CREATE, Res.CLUSTER), Grant(Op.CREATE, Res.TOPIC, "topics[].name")),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED, "topics[].error_code",
                    when="a named topic passed DESCRIBE, does not exist, allow_auto_topic_creation"
                    " (v4+, else true) and auto.create.topics.enable",
                    note="Topic_id zero, is_internal as Topic.isInternal. When allowed the"
                    " broker asks the controller to create it (CreateTopics in an Envelope with"
                    " the client's principal, checked again there) and answers"
                    " UNKNOWN_TOPIC_OR_PARTITION (3) for now. Without auto-creation a missing"
                    " topic is UNKNOWN_TOPIC_OR_PARTITION (3) or INVALID_TOPIC_EXCEPTION (17).",
                ),
            ),
            authorized_ops=(
                AuthorizedOps(
                    "topics[].topic_authorized_operations", Res.TOPIC, "topics[].name",
                    "include_topic_authorized_operations (v8+)",
                    note="For every entry that passed DESCRIBE, missing topics included; entries"
                    " denied DESCRIBE or CREATE and unknown ids keep -2147483648.",
                ),
                AuthorizedOps(
                    "cluster_authorized_operations", Res.CLUSTER, CLUSTER,
                    "include_cluster_authorized_operations (v8-10 only)",
                    gate=CLUSTER_DESCRIBE,
                    note="v11+ has no such field (DescribeCluster reports it).",
                ),
            ),
            source=f"{KA}:872 handleTopicMetadataRequest",
        ),
    )),
    Api(8, "OFFSET_COMMIT", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.EVERY_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code",
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC,
                           "topics[].name (v10: topics[].topic_id, resolved)"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code",
                    note="v10: an unknown topic_id is UNKNOWN_TOPIC_ID (100) before this check;"
                    " an authorized topic or partition that does not exist is"
                    " UNKNOWN_TOPIC_OR_PARTITION (3) after it.",
                ),
            ),
            source=f"{KA}:272 handleOffsetCommitRequest",
        ),
    )),
    Api(9, "OFFSET_FETCH", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.GROUP, "group_id (v1-7) / groups[].group_id (v8+)"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "v8+: groups[].error_code; v2-7: error_code; v1: every"
                    " topics[].partitions[].error_code (committed_offset -1)",
                    note="Per group (v8+ batches groups; the others are served).",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC,
                           "topics[].name / groups[].topics[].name (v10: .topic_id, resolved)"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code / groups[].topics[].partitions[].error_code"
                    " (committed_offset -1)",
                    when="topics listed",
                    note="v10: an unknown topic_id is UNKNOWN_TOPIC_ID (100) before this check.",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:topics[].name"),),
                    Failure.FILTERED, None,
                    when="all topics of the group: topics null",
                ),
            ),
            source=f"{KA}:1010 handleOffsetFetchRequest, :1046 fetchAllOffsetsForGroup,"
            " :1099 fetchOffsetsForGroup",
        ),
    )),
    Api(10, "FIND_COORDINATOR", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.GROUP, "key (v0-3) / coordinator_keys[] (v4+)"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "v4+: coordinators[].error_code (node_id -1, host '', port -1, no message);"
                    " v0-3: error_code, error_message",
                    message=MSG_GROUP,
                    when="key_type 0 (GROUP)",
                    note="The message is set only in v0-3 (top-level error response).",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TRANSACTIONAL_ID,
                           "key (v0-3) / coordinator_keys[] (v4+)"),),
                    Failure.PER_ENTRY, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "v4+: coordinators[].error_code (no message); v0-3: error_code, error_message",
                    message=MSG_TXN,
                    when="key_type 1 (TRANSACTION)",
                    note="The message is set only in v0-3.",
                ),
                Check(
                    (CLUSTER_ACTION,), Failure.EVERY_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "coordinators[].error_code, .error_message", MSG_CLUSTER,
                    when="key_type 2 (SHARE), v6+ (v0-5: INVALID_REQUEST, no check)",
                    note="authorizeClusterOperation throws in the middle of the batch: every key"
                    " of the request gets the error (FindCoordinatorResponse.prepareErrorResponse"
                    " with Errors.message).",
                ),
            ),
            source=f"{KA}:1236 getCoordinator",
        ),
    )),
    *(
        Api(key, name, (
            Handling(
                Listener.BROKER, Mode.LOCAL,
                checks=(Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED, "error_code" + extra,
                ),),
                preconditions=pre,
                source=f"{KA}:{line} {function}",
            ),
        ))
        for key, name, line, function, extra, pre in (
            (11, "JOIN_GROUP", 1368, "handleJoinGroupRequest",
             " (generation_id -1, member_id '', protocol_name null in v7+, members [])", ()),
            (12, "HEARTBEAT", 1458, "handleHeartbeatRequest", "", ()),
            (13, "LEAVE_GROUP", 1478, "handleLeaveGroupRequest", " (members [])", ()),
            (14, "SYNC_GROUP", 1392, "handleSyncGroupRequest", " (assignment empty)",
             ("v5+: protocol_type and protocol_name must be present, else"
              " INCONSISTENT_GROUP_PROTOCOL (23), before the check",)),
        )
    ),
    Api(15, "DESCRIBE_GROUPS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DESCRIBE, Res.GROUP, "groups[]"),),
                Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED, "groups[].error_code",
                note="Entry: group_state '', protocol_type '', protocol_data '', members [],"
                " authorized_operations -2147483648, error_message null.",
            ),),
            authorized_ops=(AuthorizedOps(
                "groups[].authorized_operations", Res.GROUP, "groups[].group_id",
                "include_authorized_operations (v3+)",
                note="Only for groups whose error_code is 0.",
            ),),
            source=f"{KA}:1294 handleDescribeGroupsRequest",
        ),
    )),
    Api(16, "LIST_GROUPS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_DESCRIBE, Grant(Op.DESCRIBE, Res.GROUP, "response:groups[].group_id")),
                Failure.FILTERED, None,
                note="DESCRIBE on CLUSTER (asked once, denial not logged) lists every group;"
                " otherwise each group is kept only if DESCRIBE on it is allowed. Never an"
                " error.",
            ),),
            source=f"{KA}:1342 handleListGroupsRequest",
        ),
    )),
    *(
        Api(key, name, (
            Handling(Listener.BROKER, Mode.LOCAL, source=f"{KA}:{line} {function}"),
            Handling(Listener.CONTROLLER, Mode.LOCAL, source=f"{CA}:{cline} {function}"),
        ), note=note)
        for key, name, line, cline, function, note in (
            (17, "SASL_HANDSHAKE", 1498, 175, "handleSaslHandshakeRequest",
             "Part of authentication; no authorization. After authentication:"
             " ILLEGAL_SASL_STATE (34)."),
            (18, "API_VERSIONS", 1510, 450, "handleApiVersionsRequest",
             "Answered before and after authentication; no authorization."),
            (36, "SASL_AUTHENTICATE", 1503, 181, "handleSaslAuthenticateRequest",
             "Part of authentication; no authorization. After authentication:"
             " ILLEGAL_SASL_STATE (34), 'SaslAuthenticate request received after successful"
             " authentication'."),
        )
    ),
    Api(19, "CREATE_TOPICS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.CREATE, Res.CLUSTER),
                     Grant(Op.CREATE, Res.TOPIC, "topics[].name")),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].error_code, .error_message", "Authorization failed.",
                    note="CREATE on CLUSTER is asked once (denial not logged) and covers every"
                    " topic; otherwise per topic. The denied topic is not created"
                    " (validate_only alike).",
                ),
                Check(
                    (Grant(Op.DESCRIBE_CONFIGS, Res.TOPIC, "topics[].name"),),
                    Failure.WITHHELD, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].topic_config_error_code (v5+)",
                    note="The topic is created, but configs is empty and num_partitions and"
                    " replication_factor stay -1. Only the topic ACL counts (no cluster"
                    " fallback); ALTER_CONFIGS implies DESCRIBE_CONFIGS.",
                ),
            ),
            preconditions=(
                "A name given twice: INVALID_REQUEST (42) 'Duplicate topic name.', whatever"
                " the ACLs.",
                "__cluster_metadata: INVALID_REQUEST (42) 'Creation of internal topic"
                " __cluster_metadata is prohibited.', whatever the ACLs.",
            ),
            source=f"{CA}:363 handleCreateTopics, :391 createTopics; {RCM}:817 createTopic",
        ),
    )),
    Api(20, "DELETE_TOPICS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DELETE, Res.CLUSTER),
                     Grant(Op.DESCRIBE, Res.TOPIC,
                           "topic_names[] (v1-5) / topics[].name or topics[].topic_id (v6+)")),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message (v5+)", MSG_TOPIC,
                    note="'Describable'. By name: denied before existence is looked at (topic_id"
                    " zero). By id: the id is resolved first (unknown: UNKNOWN_TOPIC_ID), then"
                    " denied with name null.",
                ),
                Check(
                    (Grant(Op.DELETE, Res.CLUSTER),
                     Grant(Op.DELETE, Res.TOPIC,
                           "topic_names[] (v1-5) / topics[].name or topics[].topic_id (v6+)")),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message (v5+)", MSG_TOPIC,
                    note="'Deletable'. By name: a describable topic that does not exist is"
                    " UNKNOWN_TOPIC_OR_PARTITION (3) first; by id the name is echoed. DELETE on"
                    " CLUSTER (asked once, denial not logged) makes every topic describable and"
                    " deletable. Responses are shuffled.",
                ),
            ),
            preconditions=(
                "delete.topic.enable=false: TOPIC_DELETION_DISABLED (73) for every topic (v1-2:"
                " INVALID_REQUEST), before any check.",
                "Duplicates, or a name and an id in one entry: INVALID_REQUEST (42) per entry.",
            ),
            source=f"{CA}:199 handleDeleteTopics, :223 deleteTopics",
        ),
    )),
    Api(21, "DELETE_RECORDS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DELETE, Res.TOPIC, "topics[].name"),),
                Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                "topics[].partitions[].error_code (low_watermark -1)",
                note="Authorized partitions that do not exist: UNKNOWN_TOPIC_OR_PARTITION (3).",
            ),),
            source=f"{KA}:1530 handleDeleteRecordsRequest",
        ),
    )),
    Api(22, "INIT_PRODUCER_ID", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
                    Failure.TOP_LEVEL, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "error_code (producer_id -1, producer_epoch -1)",
                    when="transactional_id not null",
                ),
                Check(
                    (Grant(Op.TWO_PHASE_COMMIT, Res.TRANSACTIONAL_ID, "transactional_id"),),
                    Failure.TOP_LEVEL, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "error_code (producer_id -1, producer_epoch -1)",
                    when="transactional_id not null and enable2_pc (v6+; v6 is"
                    " latestVersionUnstable in 4.4, not advertised)",
                ),
                Check(
                    (Grant(Op.IDEMPOTENT_WRITE, Res.CLUSTER),
                     Grant(Op.WRITE, Res.TOPIC, ANY_NAME, by_resource_type=True)),
                    Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "error_code (producer_id -1, producer_epoch -1)",
                    when="transactional_id null (idempotent producer)",
                    note="IDEMPOTENT_WRITE denial is not logged; then WRITE on any topic through"
                    " authorizeByResourceType (KIP-679).",
                ),
            ),
            source=f"{KA}:1595 handleInitProducerIdRequest",
        ),
    )),
    Api(23, "OFFSET_FOR_LEADER_EPOCH", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ACTION, Grant(Op.DESCRIBE, Res.TOPIC, "topics[].topic")),
                Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                "topics[].partitions[].error_code",
                note="CLUSTER_ACTION (asked once, denial not logged) covers every topic;"
                " otherwise DESCRIBE per topic (KIP-320 consumers).",
            ),),
            source=f"{KA}:2116 handleOffsetForLeaderEpochRequest",
        ),
    )),
    Api(24, "ADD_PARTITIONS_TO_TXN", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (CLUSTER_ACTION,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "error_code", when="v4+ (broker to coordinator, verify_only or not)",
                    note="The only check for v4+: no transactional id or topic check.",
                ),
                Check(
                    (Grant(Op.WRITE, Res.TRANSACTIONAL_ID, "v3_and_below_transactional_id"),),
                    Failure.EVERY_ENTRY, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "results_by_topic_v3_and_below[].results_by_partition[].partition_error_code",
                    when="v0-3 (clients)",
                ),
                Check(
                    (Grant(Op.WRITE, Res.TOPIC, "v3_and_below_topics[].name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "results_by_topic_v3_and_below[].results_by_partition[].partition_error_code",
                    when="v0-3",
                    note="Internal topics (__consumer_offsets, __transaction_state,"
                    " __share_group_state) always fail. Any failure fails the whole request:"
                    " unknown partitions UNKNOWN_TOPIC_OR_PARTITION (3), the others"
                    " OPERATION_NOT_ATTEMPTED (55).",
                ),
            ),
            source=f"{KA}:1849 handleAddPartitionsToTxnRequest",
        ),
    )),
    Api(25, "ADD_OFFSETS_TO_TXN", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
                    Failure.TOP_LEVEL, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "error_code",
                ),
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED, "error_code",
                ),
            ),
            source=f"{KA}:1961 handleAddOffsetsToTxnRequest",
        ),
    )),
    Api(26, "END_TXN", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
                Failure.TOP_LEVEL, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "error_code",
            ),),
            source=f"{KA}:1660 handleEndTxnRequest",
        ),
    )),
    Api(27, "WRITE_TXN_MARKERS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ALTER, CLUSTER_ACTION), Failure.EVERY_ENTRY,
                Err.CLUSTER_AUTHORIZATION_FAILED, "markers[].topics[].partitions[].error_code",
                note="ALTER on CLUSTER (denial not logged), else CLUSTER_ACTION through"
                " authorizeClusterOperation, whose exception fills every partition.",
            ),),
            source=f"{KA}:1703 handleWriteTxnMarkersRequest",
        ),
    )),
    Api(28, "TXN_OFFSET_COMMIT", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.WRITE, Res.TRANSACTIONAL_ID, "transactional_id"),),
                    Failure.EVERY_ENTRY, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code",
                ),
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.EVERY_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code",
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC, "topics[].name (4.4, v6: topics[].topic_id,"
                           " resolved)"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code",
                    note="Authorized topics or partitions that do not exist:"
                    " UNKNOWN_TOPIC_OR_PARTITION (3). 4.4 v6 (KIP-1319): an unknown topic_id is"
                    " UNKNOWN_TOPIC_ID (100), tested before the check (4.4 bytecode).",
                ),
            ),
            source=f"{KA}:2011 handleTxnOffsetCommitRequest",
        ),
    )),
    Api(29, "DESCRIBE_ACLS", (
        *(
            Handling(
                listener, Mode.LOCAL,
                checks=(Check(
                    (CLUSTER_DESCRIBE,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "error_code, error_message", MSG_NEEDS_PERMISSION,
                ),),
                preconditions=(
                    "No authorizer configured: SECURITY_DISABLED (54), error_message 'No"
                    " Authorizer is configured on the broker' (the DESCRIBE check passes"
                    " without an authorizer).",
                ),
                source=f"{ACL}:62 handleDescribeAcls",
                note=listener_note,
            )
            for listener, listener_note in (
                (Listener.BROKER, "Served by the broker from its own authorizer."),
                (Listener.CONTROLLER, ""),
            )
        ),
    )),
    *(
        Api(key, name, (
            BROKER_FORWARDED,
            Handling(
                Listener.CONTROLLER, Mode.LOCAL,
                checks=(Check(
                    (CLUSTER_ALTER,), Failure.EVERY_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    f"{entries}.error_code, .error_message", MSG_NEEDS_PERMISSION,
                ),),
                preconditions=(
                    f"No authorizer configured: SECURITY_DISABLED (54) in every {entries}"
                    " entry, error_message 'No Authorizer is configured.' (after the check,"
                    " which passes without an authorizer).",
                ),
                source=f"{ACL}:{line} {function}",
            ),
        ))
        for key, name, entries, line, function in (
            (30, "CREATE_ACLS", "results[]", 84, "handleCreateAcls"),
            (31, "DELETE_ACLS", "filter_results[]", 140, "handleDeleteAcls"),
        )
    ),
    Api(32, "DESCRIBE_CONFIGS", tuple(
        Handling(
            listener, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE_CONFIGS, Res.CLUSTER),),
                    Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "results[].error_code, .error_message (configs [])", MSG_CLUSTER,
                    when=CLUSTER_CONFIG_TYPES,
                ),
                Check(
                    (Grant(Op.DESCRIBE_CONFIGS, Res.TOPIC, "resources[].resource_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "results[].error_code, .error_message (configs [])", MSG_TOPIC,
                    when="resource_type TOPIC (2)",
                    note="Checked before the topic's existence (missing:"
                    " UNKNOWN_TOPIC_OR_PARTITION).",
                ),
                Check(
                    (Grant(Op.DESCRIBE_CONFIGS, Res.GROUP, "resources[].resource_name"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "results[].error_code, .error_message (configs [])", MSG_GROUP,
                    when="resource_type GROUP (32)",
                ),
            ),
            preconditions=(
                "Any other resource_type: InvalidRequestException, INVALID_REQUEST (42) in"
                " every results[] entry (whole request).",
            ),
            source=f"{KA}:2202 / {CA}:818 handleDescribeConfigsRequest;"
            f" {CFG}:49 handleDescribeConfigsRequest",
            note="Authorized results come first, the denied ones after them.",
        )
        for listener in (Listener.BROKER, Listener.CONTROLLER)
    )),
    Api(33, "ALTER_CONFIGS", (
        Handling(
            Listener.BROKER, Mode.FORWARDED,
            checks=(Check(
                (Grant(Op.ALTER_CONFIGS, Res.CLUSTER),),
                Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                "responses[].error_code, .error_message", MSG_CLUSTER,
                when="4.4: resource_type BROKER (4), before the broker id and config"
                " validation (4.2 checked BROKER only on the controller)",
                note="Pre-forward (ConfigAdminManager.preprocess, 4.4 bytecode): a denied"
                " resource is answered by the broker and not forwarded.",
            ),),
            preconditions=(
                "Before the check: a resource given twice, duplicate config names or null"
                " values: INVALID_REQUEST (42) for that resource.",
                "BROKER_LOGGER (8) and other types: INVALID_REQUEST 'Unknown resource type N'.",
                "The remaining resources go to the controller in an Envelope.",
            ),
            source=f"{KA}:2151 handleAlterConfigsRequest; {CAM}:209 preprocess",
        ),
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.CLUSTER),),
                    Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_CLUSTER,
                    when="resource_type BROKER (4) or CLIENT_METRICS (16)",
                ),
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.TOPIC, "resources[].resource_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_TOPIC,
                    when="resource_type TOPIC (2)",
                ),
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.GROUP, "resources[].resource_name"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_GROUP,
                    when="resource_type GROUP (32)",
                ),
            ),
            preconditions=(
                "Unknown resource_type: UNSUPPORTED_VERSION (35) 'Unknown resource type N.'",
                "A resource given twice: INVALID_REQUEST (42) 'Duplicate resource.'",
                "BROKER_LOGGER (8): INVALID_REQUEST (42) 'Unexpected resource type"
                " BROKER_LOGGER.' (in place of a check).",
            ),
            source=f"{CA}:496 handleLegacyAlterConfigs, :471 authorizeAlterResource",
        ),
    )),
    Api(34, "ALTER_REPLICA_LOG_DIRS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ALTER,), Failure.EVERY_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                "results[].partitions[].error_code",
            ),),
            source=f"{KA}:2208 handleAlterReplicaLogDirsRequest",
        ),
    )),
    Api(35, "DESCRIBE_LOG_DIRS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_DESCRIBE,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code (v3+), results []",
                note="v1-2 have no top-level error_code: the client sees empty results.",
            ),),
            source=f"{KA}:2230 handleDescribeLogDirsRequest",
        ),
    )),
    Api(37, "CREATE_PARTITIONS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.ALTER, Res.TOPIC, "topics[].name"),),
                Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                "results[].error_code (error_message null)",
            ),),
            preconditions=(
                "A topic given twice: INVALID_REQUEST (42) 'Duplicate topic name.' before the"
                " check.",
            ),
            source=f"{CA}:795 handleCreatePartitions, :825 createPartitions",
        ),
    )),
    Api(38, "CREATE_DELEGATION_TOKEN", (
        Handling(
            Listener.BROKER, Mode.FORWARDED,
            checks=(Check(
                (Grant(Op.CREATE_TOKENS, Res.USER,
                       "'<owner_principal_type>:<owner_principal_name>' (v3+)"),),
                Failure.TOP_LEVEL, Err.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
                "error_code (principal_* = owner, token_requester_* = requester)",
                when="owner_principal_name set and the owner is not the requester",
                note="Pre-forward; the resource name is KafkaPrincipal.toString of the owner,"
                " e.g. 'User:alice'. A requester may always create tokens for itself.",
            ),),
            preconditions=(
                "First: a PLAINTEXT listener, SSL with an ANONYMOUS principal (no client auth)"
                " or a token-authenticated principal: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64).",
                "After the check: a renewer whose principal_type is not 'User':"
                " INVALID_PRINCIPAL_TYPE (67). Then forwarded.",
            ),
            source=f"{KA}:2253 handleCreateTokenRequest",
        ),
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.CREATE_TOKENS, Res.USER,
                       "'<owner_principal_type>:<owner_principal_name>' (v3+)"),),
                Failure.TOP_LEVEL, Err.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "error_code",
                when="owner_principal_name set and the owner is not the requester",
            ),),
            preconditions=(
                "First: a token-authenticated principal, or (not forwarded) a PLAINTEXT"
                " listener or SSL with ANONYMOUS: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64).",
                "Then DelegationTokenControlManager: tokens disabled (no"
                " delegation.token.secret.key) DELEGATION_TOKEN_AUTH_DISABLED (61), renewer"
                " type INVALID_PRINCIPAL_TYPE (67).",
            ),
            source=f"{CA}:917 handleCreateDelegationTokenRequest; {DTCM}:160 createDelegationToken",
        ),
    )),
    *(
        Api(key, name, (
            Handling(
                Listener.BROKER, Mode.FORWARDED,
                preconditions=(
                    "PLAINTEXT, SSL with ANONYMOUS, or a token-authenticated principal:"
                    " DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64), expiry_timestamp_ms -1; else"
                    " forwarded.",
                ),
                source=f"{KA}:{line} {function}",
            ),
            Handling(
                Listener.CONTROLLER, Mode.LOCAL,
                preconditions=(
                    "A token-authenticated principal, or (not forwarded) PLAINTEXT or SSL with"
                    " ANONYMOUS: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64).",
                    "No ACL: DelegationTokenControlManager answers DELEGATION_TOKEN_AUTH_DISABLED"
                    " (61), DELEGATION_TOKEN_NOT_FOUND (62), " + expired + "then, unless the"
                    " principal is the token's owner or one of its renewers,"
                    " DELEGATION_TOKEN_OWNER_MISMATCH (63).",
                ),
                source=f"{CA}:{cline} {cfunction}; {DTCM}:{dline} {dfunction}",
            ),
        ), note="Ownership, not ACLs, decides.")
        for key, name, line, function, cline, cfunction, dline, dfunction, expired in (
            (39, "RENEW_DELEGATION_TOKEN", 2296, "handleRenewTokenRequest", 965,
             "handleRenewDelegationTokenRequest", 233, "renewDelegationToken",
             "DELEGATION_TOKEN_EXPIRED (66), "),
            (40, "EXPIRE_DELEGATION_TOKEN", 2283, "handleExpireTokenRequest", 989,
             "handleExpireDelegationTokenRequest", 284, "expireDelegationToken", ""),
        )
    ),
    Api(41, "DESCRIBE_DELEGATION_TOKEN", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DESCRIBE, Res.DELEGATION_TOKEN, "response:tokens[].token_id"),
                 Grant(Op.DESCRIBE_TOKENS, Res.USER,
                       "response:'<principal_type>:<principal_name>' of the token's owner")),
                Failure.FILTERED, None,
                when="for each token not owned or renewable by the requester",
                note="Tokens the requester owns or may renew are always shown; owners[] (if not"
                " null) first restricts the tokens to those owners/renewers; an empty owners"
                " list returns no token.",
            ),),
            preconditions=(
                "PLAINTEXT, SSL with ANONYMOUS, or a token-authenticated principal:"
                " DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64).",
                "Tokens disabled: DELEGATION_TOKEN_AUTH_DISABLED (61).",
            ),
            source=f"{KA}:2309 handleDescribeTokensRequest;"
            " server-common/.../security/DelegationTokenManager.java:111 filterToken",
        ),
        Handling(
            Listener.CONTROLLER, Mode.UNHANDLED,
            source=f"{CA}:95 handle (no case: ApiException 'Unsupported ApiKey')",
            note="The JSON lists the controller listener, ControllerApis (4.2.1 and 4.4.0) has"
            " no handler: error_code UNKNOWN_SERVER_ERROR (-1), no check.",
        ),
    )),
    Api(42, "DELETE_GROUPS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DELETE, Res.GROUP, "groups_names[]"),),
                Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                "results[].error_code (error_message null)",
                note="Duplicate names are answered once.",
            ),),
            source=f"{KA}:1420 handleDeleteGroupsRequest",
        ),
    )),
    Api(43, "ELECT_LEADERS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ALTER,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code (v1+) and, for each requested partition,"
                " replica_election_results[].partition_result[].error_code, .error_message",
                MSG_NEEDS_PERMISSION,
                note="The docs table says CLUSTER_ACTION; the code asks ALTER.",
            ),),
            source=f"{CA}:575 handleElectLeaders",
        ),
    )),
    Api(44, "INCREMENTAL_ALTER_CONFIGS", (
        Handling(
            Listener.BROKER, Mode.FORWARDED,
            checks=(
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.CLUSTER),),
                    Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_CLUSTER,
                    when="resource_type BROKER_LOGGER (8)",
                    note="Served by the broker itself (RuntimeLoggerManager), never forwarded;"
                    " then the node id and log levels are validated.",
                ),
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.CLUSTER),),
                    Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_CLUSTER,
                    when="4.4: resource_type BROKER (4), before the broker id and config"
                    " validation (4.2 checked BROKER only on the controller)",
                    note="Pre-forward (4.4 bytecode); a denied resource is not forwarded.",
                ),
            ),
            preconditions=(
                "Before the checks: a resource given twice, duplicate config names or null"
                " values for SET/APPEND/SUBTRACT: INVALID_REQUEST (42) for that resource.",
                "TOPIC, CLIENT_METRICS, GROUP (and allowed BROKER) resources go to the"
                " controller in an Envelope.",
            ),
            source=f"{KA}:2175 handleIncrementalAlterConfigsRequest; {CAM}:100 preprocess;"
            " core/src/main/java/kafka/server/logger/RuntimeLoggerManager.java:57",
        ),
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(
                Check(
                    (CLUSTER_ACTION,), Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_CLUSTER,
                    when="resource_type BROKER_LOGGER (8)",
                    note="On the controller the loggers need CLUSTER_ACTION, not ALTER_CONFIGS.",
                ),
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.CLUSTER),),
                    Failure.PER_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_CLUSTER,
                    when="resource_type BROKER (4) or CLIENT_METRICS (16)",
                ),
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.TOPIC, "resources[].resource_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_TOPIC,
                    when="resource_type TOPIC (2)",
                ),
                Check(
                    (Grant(Op.ALTER_CONFIGS, Res.GROUP, "resources[].resource_name"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_GROUP,
                    when="resource_type GROUP (32)",
                ),
            ),
            preconditions=(
                "Unknown resource_type: UNSUPPORTED_VERSION (35) 'Unknown resource type N.'",
                "A resource given twice: INVALID_REQUEST (42) 'Duplicate resource.'",
            ),
            source=f"{CA}:714 handleIncrementalAlterConfigs, :471 authorizeAlterResource",
        ),
    )),
    Api(45, "ALTER_PARTITION_REASSIGNMENTS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ALTER,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code, error_message, and every responses[].partitions[].error_code,"
                " .error_message", MSG_NEEDS_PERMISSION,
            ),),
            source=f"{CA}:877 handleAlterPartitionReassignments",
        ),
    )),
    Api(46, "LIST_PARTITION_REASSIGNMENTS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_DESCRIBE,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code, error_message (requested topics echoed, no replicas)",
                MSG_NEEDS_PERMISSION,
            ),),
            source=f"{CA}:1013 handleListPartitionReassignments",
        ),
    )),
    Api(47, "OFFSET_DELETE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DELETE, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED, "error_code (topics [])",
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC, "topics[].name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "topics[].partitions[].error_code",
                    note="Authorized topics or partitions that do not exist:"
                    " UNKNOWN_TOPIC_OR_PARTITION (3).",
                ),
            ),
            source=f"{KA}:2356 handleOffsetDeleteRequest",
        ),
    )),
    Api(48, "DESCRIBE_CLIENT_QUOTAS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DESCRIBE_CONFIGS, Res.CLUSTER),), Failure.TOP_LEVEL,
                Err.CLUSTER_AUTHORIZATION_FAILED, "error_code, error_message (entries null)",
                MSG_CLUSTER,
            ),),
            source=f"{KA}:2422 handleDescribeClientQuotasRequest",
        ),
    )),
    Api(49, "ALTER_CLIENT_QUOTAS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.ALTER_CONFIGS, Res.CLUSTER),), Failure.EVERY_ENTRY,
                Err.CLUSTER_AUTHORIZATION_FAILED, "entries[].error_code, .error_message",
                MSG_CLUSTER,
                note="authorizeClusterOperation's exception; AlterClientQuotasRequest"
                ".getErrorResponse uses Errors.message, not the exception's.",
            ),),
            source=f"{CA}:698 handleAlterClientQuotas",
        ),
    )),
    Api(50, "DESCRIBE_USER_SCRAM_CREDENTIALS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_DESCRIBE,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code, error_message; plus one results[] entry per requested user with"
                " the same error_code/error_message and user ''", MSG_CLUSTER,
            ),),
            source=f"{KA}:2437 handleDescribeUserScramCredentialsRequest",
        ),
        Handling(
            Listener.CONTROLLER, Mode.UNHANDLED,
            source=f"{CA}:95 handle (no case: ApiException 'Unsupported ApiKey')",
            note="The JSON lists the controller listener, ControllerApis (4.2.1 and 4.4.0) has"
            " no handler: UNKNOWN_SERVER_ERROR (-1), no check.",
        ),
    )),
    Api(51, "ALTER_USER_SCRAM_CREDENTIALS", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ALTER,), Failure.EVERY_ENTRY, Err.CLUSTER_AUTHORIZATION_FAILED,
                "results[].error_code, .error_message (one per distinct user, sorted)",
                MSG_NEEDS_PERMISSION,
            ),),
            source=f"{CA}:889 handleAlterUserScramCredentials",
        ),
    )),
    *(
        Api(key, name, (
            Handling(
                Listener.CONTROLLER, Mode.LOCAL, checks=(_inter_node(Op.CLUSTER_ACTION),),
                source=f"{CA}:{line} {function}",
            ),
        ))
        for key, name, line, function in (
            (52, "VOTE", 555, "handleVote"),
            (53, "BEGIN_QUORUM_EPOCH", 560, "handleBeginQuorumEpoch"),
            (54, "END_QUORUM_EPOCH", 565, "handleEndQuorumEpoch"),
            (56, "ALTER_PARTITION", 594, "handleAlterPartitionRequest"),
            (59, "FETCH_SNAPSHOT", 194, "handleFetchSnapshot"),
            (62, "BROKER_REGISTRATION", 658, "handleBrokerRegistration"),
            (63, "BROKER_HEARTBEAT", 610, "handleBrokerHeartBeatRequest"),
            (67, "ALLOCATE_PRODUCER_IDS", 1025, "handleAllocateProducerIdsRequest"),
            (73, "ASSIGN_REPLICAS_TO_DIRS", 1081, "handleAssignReplicasToDirs"),
            (82, "UPDATE_RAFT_VOTER", 1102, "handleUpdateRaftVoter"),
        )
    ),
    Api(55, "DESCRIBE_QUORUM", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(_inter_node(Op.DESCRIBE, where="error_code, error_message (v2+)",
                                message=MSG_CLUSTER),),
            source=f"{CA}:570 handleDescribeQuorum",
        ),
    )),
    Api(57, "UPDATE_FEATURES", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(_inter_node(Op.ALTER, where="error_code, error_message (results [])",
                                message=MSG_NEEDS_PERMISSION),),
            source=f"{CA}:1043 handleUpdateFeatures",
        ),
    )),
    Api(58, "ENVELOPE", (
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(Check(
                (CLUSTER_ACTION,), Failure.TOP_LEVEL, Err.CLUSTER_AUTHORIZATION_FAILED,
                "error_code (EnvelopeResponse has no message; response_data null)",
                note="Asked for the connection's principal (the forwarding broker), before the"
                " inner request is parsed. The inner request is then authorized as the"
                " principal in request_principal; the forwarding broker turns an Envelope"
                " error into UNKNOWN_SERVER_ERROR for its client.",
            ),),
            preconditions=(
                "After the check: undeserializable request_principal:"
                " PRINCIPAL_DESERIALIZATION_FAILURE (97); inner API not forwardable, bad client"
                " address: INVALID_REQUEST (42); unparsable inner request: UNSUPPORTED_VERSION"
                " (35).",
            ),
            source=f"{CA}:165 handleEnvelopeRequest; {ENV}:33 handleEnvelopeRequest;"
            f" {FWD}:140-170",
        ),
    )),
    Api(60, "DESCRIBE_CLUSTER", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            authorized_ops=(AuthorizedOps(
                "cluster_authorized_operations", Res.CLUSTER, CLUSTER,
                "include_cluster_authorized_operations", gate=CLUSTER_DESCRIBE,
            ),),
            preconditions=(
                "v1+: endpoint_type must be 1 (BROKER): unknown UNSUPPORTED_ENDPOINT_TYPE,"
                " controller MISMATCHED_ENDPOINT_TYPE (v0: INVALID_REQUEST).",
            ),
            source=f"{KA}:2450 handleDescribeCluster; {AUTH}:122 computeDescribeClusterResponse",
            note="No authorization on the broker listener: anyone may describe the cluster.",
        ),
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(_inter_node(Op.ALTER, where="error_code, error_message",
                                message=MSG_NEEDS_PERMISSION),),
            authorized_ops=(AuthorizedOps(
                "cluster_authorized_operations", Res.CLUSTER, CLUSTER,
                "include_cluster_authorized_operations", gate=CLUSTER_DESCRIBE,
                note="After the ALTER check passed.",
            ),),
            preconditions=(
                "First: no finalized metadata.version, or one without controller registration:"
                " UNSUPPORTED_VERSION (35).",
                "After the check: endpoint_type must be 2 (CONTROLLER).",
            ),
            source=f"{CA}:1059 handleDescribeCluster",
            note="'Unlike on the broker, DESCRIBE_CLUSTER on the controller requires ALTER on"
            " CLUSTER.'",
        ),
    )),
    Api(61, "DESCRIBE_PRODUCERS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.READ, Res.TOPIC, "topics[].name"),),
                Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                "topics[].partitions[].error_code, .error_message", MSG_TOPIC,
                note="An invalid topic name is INVALID_TOPIC_EXCEPTION (17) before the check;"
                " an authorized topic that does not exist UNKNOWN_TOPIC_OR_PARTITION after.",
            ),),
            source=f"{KA}:2478 handleDescribeProducersRequest",
        ),
    )),
    Api(64, "UNREGISTER_BROKER", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(_inter_node(Op.ALTER, where="error_code, error_message",
                                message=MSG_NEEDS_PERMISSION),),
            source=f"{CA}:637 handleUnregisterBroker",
        ),
    )),
    Api(65, "DESCRIBE_TRANSACTIONS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.TRANSACTIONAL_ID, "transactional_ids[]"),),
                    Failure.PER_ENTRY, Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "transaction_states[].error_code",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC,
                           "response:transaction_states[].topics[].topic"),),
                    Failure.FILTERED, None,
                    note="Topics of a described transaction the principal may not DESCRIBE are"
                    " removed from it.",
                ),
            ),
            source=f"{KA}:2533 handleDescribeTransactionsRequest",
        ),
    )),
    Api(66, "LIST_TRANSACTIONS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DESCRIBE, Res.TRANSACTIONAL_ID,
                       "response:transaction_states[].transactional_id"),),
                Failure.FILTERED, None, note="Never an error.",
            ),),
            source=f"{KA}:2561 handleListTransactionsRequest",
        ),
    )),
    Api(68, "CONSUMER_GROUP_HEARTBEAT", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED,
                    "error_code (error_message null)",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "subscribed_topic_names[]"),),
                    Failure.TOP_LEVEL, Err.TOPIC_AUTHORIZATION_FAILED,
                    "error_code (error_message null)",
                    when="subscribed_topic_names not null and not empty",
                    note="Every name must pass; one denied topic fails the heartbeat (the"
                    " coordinator is not called).",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response-side: topics matching"
                           " subscribed_topic_regex (v1+)"),),
                    Failure.FILTERED, None,
                    when="subscribed_topic_regex set",
                    note="The group coordinator resolves the regex asynchronously and drops the"
                    " matched topics the principal may not DESCRIBE, with the context of the"
                    " heartbeat that triggered the resolution (4.2 GroupMetadataManager"
                    " .filterTopicDescribeAuthorizedTopics; 4.4 TopicRegexResolver). Only with"
                    " an authorizer.",
                ),
            ),
            preconditions=(
                "First: the consumer protocol disabled (group.coordinator.rebalance.protocols"
                " without 'consumer' or group.version < 1): UNSUPPORTED_VERSION (35).",
            ),
            source=f"{KA}:2597 handleConsumerGroupHeartbeat; {GMM}:3464",
        ),
    )),
    Api(69, "CONSUMER_GROUP_DESCRIBE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.GROUP, "group_ids[]"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "groups[].error_code (error_message null)",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:groups[].members[].assignment"
                           " and .target_assignment .topic_partitions[].topic_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "groups[].error_code, .error_message (members [])",
                    "The group has described topic(s) that the client is not authorized to"
                    " describe.",
                    note="One denied topic replaces the whole group entry. " + DESCRIBED_TOPIC_NOTE,
                ),
            ),
            preconditions=(
                "First: the consumer protocol disabled: UNSUPPORTED_VERSION (35) for the whole"
                " request.",
            ),
            authorized_ops=(AuthorizedOps(
                "groups[].authorized_operations", Res.GROUP, "groups[].group_id",
                "include_authorized_operations", note="Only for groups whose error_code is 0.",
            ),),
            source=f"{KA}:2637 handleConsumerGroupDescribe",
        ),
    )),
    Api(70, "CONTROLLER_REGISTRATION", (
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(_inter_node(Op.CLUSTER_ACTION, where="error_code, error_message",
                                message=MSG_CLUSTER),),
            source=f"{CA}:863 handleControllerRegistration",
        ),
    )),
    *(
        Api(key, name, (
            Handling(Listener.BROKER, Mode.LOCAL, source=f"{KA}:{line} {function}",
                     note="No authorization (ClientMetricsManager checks none)."),
        ))
        for key, name, line, function in (
            (71, "GET_TELEMETRY_SUBSCRIPTIONS", 2962, "handleGetTelemetrySubscriptionsRequest"),
            (72, "PUSH_TELEMETRY", 2972, "handlePushTelemetryRequest"),
        )
    ),
    Api(74, "LIST_CONFIG_RESOURCES", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.DESCRIBE_CONFIGS, Res.CLUSTER),), Failure.TOP_LEVEL,
                Err.CLUSTER_AUTHORIZATION_FAILED, "error_code (no message)",
                note="One cluster-level check lists every resource; no per-resource filter.",
            ),),
            source=f"{KA}:2987 handleListConfigResources",
        ),
    )),
    Api(75, "DESCRIBE_TOPIC_PARTITIONS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "topics[].name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED, "topics[].error_code",
                    when="topics listed",
                    note="Entry: topic_id zero, is_internal false, partitions [],"
                    " topic_authorized_operations -2147483648; appended after the authorized"
                    " topics. Names before cursor.topic_name are skipped first.",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:topics[].name"),),
                    Failure.FILTERED, None, when="all topics: topics empty",
                ),
            ),
            authorized_ops=(AuthorizedOps(
                "topics[].topic_authorized_operations", Res.TOPIC, "topics[].name", "always",
                note="Every entry that passed DESCRIBE; no request flag.",
            ),),
            source=f"{DTP}:58 handleDescribeTopicPartitionsRequest (from {KA}:996)",
        ),
    )),
    Api(76, "SHARE_GROUP_HEARTBEAT", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED, "error_code",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "subscribed_topic_names[]"),),
                    Failure.TOP_LEVEL, Err.TOPIC_AUTHORIZATION_FAILED, "error_code",
                    when="subscribed_topic_names not null and not empty",
                    note="Every name must pass.",
                ),
            ),
            preconditions=(
                "First: " + SHARE_ENABLED + ".",
                "Between the checks: member_id empty or longer than 36: INVALID_REQUEST (42)"
                " 'Invalid member id in the request.'",
            ),
            source=f"{KA}:3039 handleShareGroupHeartbeat",
        ),
    )),
    Api(77, "SHARE_GROUP_DESCRIBE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.GROUP, "group_ids[]"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "groups[].error_code (error_message null)",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:groups[].members[].assignment"
                           ".topic_partitions[].topic_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "groups[].error_code, .error_message (members [])",
                    "The group has described topic(s) that the client is not authorized to"
                    " describe.",
                    note="One denied topic replaces the whole group entry. " + DESCRIBED_TOPIC_NOTE,
                ),
            ),
            preconditions=("First: " + SHARE_ENABLED + ".",),
            authorized_ops=(AuthorizedOps(
                "groups[].authorized_operations", Res.GROUP, "groups[].group_id",
                "include_authorized_operations", note="Only for groups whose error_code is 0.",
            ),),
            source=f"{KA}:3082 handleShareGroupDescribe",
        ),
    )),
    Api(78, "SHARE_FETCH", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED,
                    "error_code (responses [])",
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC, "topics[].topic_id, resolved"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].partitions[].error_code; piggybacked acknowledgements:"
                    " responses[].partitions[].acknowledge_error_code",
                    note="Every partition of the share session and of the request. Unknown"
                    " topic ids: UNKNOWN_TOPIC_ID (100); authorized unknown partitions:"
                    " UNKNOWN_TOPIC_OR_PARTITION (3).",
                ),
            ),
            preconditions=(
                "First: " + SHARE_ENABLED + ".",
                "4.4: group_id null: INVALID_REQUEST (42) 'Invalid group id in the request.',"
                " before the group check.",
                "After the group check: invalid member_id: INVALID_REQUEST 'Invalid member id"
                " in the request.'; v2 renew-ack field checks; share session errors.",
            ),
            source=f"{KA}:3167 handleShareFetchRequest, :3398 handleFetchFromShareFetchRequest,"
            " :3478 handleAcknowledgements",
        ),
    )),
    Api(79, "SHARE_ACKNOWLEDGE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED, "error_code",
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC, "topics[].topic_id, resolved"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].partitions[].error_code",
                    note="Unknown topic ids: UNKNOWN_TOPIC_ID (100).",
                ),
            ),
            preconditions=(
                "First: " + SHARE_ENABLED + ".",
                "4.4: group_id null: INVALID_REQUEST (42) 'Invalid group id in the request.',"
                " before the group check.",
                "After the group check: invalid member_id INVALID_REQUEST; share session"
                " update errors.",
            ),
            source=f"{KA}:3533 handleShareAcknowledgeRequest, :3478 handleAcknowledgements",
        ),
    )),
    *(
        Api(key, name, (
            BROKER_FORWARDED,
            Handling(
                Listener.CONTROLLER, Mode.LOCAL,
                checks=(_inter_node(Op.ALTER, where="error_code, error_message",
                                    message=MSG_CLUSTER),),
                source=f"{CA}:{line} {function}",
            ),
        ))
        for key, name, line, function in (
            (80, "ADD_RAFT_VOTER", 1092, "handleAddRaftVoter"),
            (81, "REMOVE_RAFT_VOTER", 1097, "handleRemoveRaftVoter"),
        )
    ),
    *(
        Api(key, name, (
            Handling(
                Listener.BROKER, Mode.LOCAL,
                checks=(_inter_node(
                    Op.CLUSTER_ACTION, Failure.EVERY_ENTRY,
                    "results[].partitions[].error_code, .error_message", MSG_CLUSTER),),
                source=f"{KA}:{line} {function}",
                note="Broker (share coordinator) to broker; toGlobalErrorResponse.",
            ),
        ))
        for key, name, line, function in (
            (83, "INITIALIZE_SHARE_GROUP_STATE", 3612, "handleInitializeShareGroupStateRequest"),
            (84, "READ_SHARE_GROUP_STATE", 3636, "handleReadShareGroupStateRequest"),
            (85, "WRITE_SHARE_GROUP_STATE", 3660, "handleWriteShareGroupStateRequest"),
            (86, "DELETE_SHARE_GROUP_STATE", 3684, "handleDeleteShareGroupStateRequest"),
            (87, "READ_SHARE_GROUP_STATE_SUMMARY", 3708,
             "handleReadShareGroupStateSummaryRequest"),
        )
    ),
    Api(88, "STREAMS_GROUP_HEARTBEAT", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED, "error_code",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC,
                           "topology.subtopologies[].source_topics[],"
                           " .repartition_sink_topics[], .repartition_source_topics[].name,"
                           " .state_changelog_topics[].name"),),
                    Failure.TOP_LEVEL, Err.TOPIC_AUTHORIZATION_FAILED,
                    "error_code (error_message null)",
                    when="topology not null",
                    note="Every topic must pass. source_topic_regex[] is not checked here.",
                ),
                Check(
                    (Grant(Op.CREATE, Res.CLUSTER),
                     Grant(Op.CREATE, Res.TOPIC, "response-side: internal topics the"
                           " coordinator wants created")),
                    Failure.WITHHELD, None,
                    "status[] entry status_code 3 (MISSING_INTERNAL_TOPICS), status_detail"
                    " 'Unauthorized to CREATE on topics a, b.' (appended as '; Unauthorized"
                    " to CREATE on topics ...' to an existing one)",
                    when="after the coordinator answered and asked for internal topics",
                    note="The heartbeat succeeds (error_code 0); the topics are not created."
                    " Allowed: created through CreateTopics in an Envelope with the client's"
                    " principal.",
                ),
            ),
            preconditions=(
                "First: streams groups disabled (group.coordinator.rebalance.protocols without"
                " 'streams' or streams.version < 1): UNSUPPORTED_VERSION (35).",
                "After the group check: a Kafka-internal topic in the topology, or an invalid"
                " topic name: STREAMS_INVALID_TOPOLOGY (130) with a message, before the topic"
                " check.",
            ),
            source=f"{KA}:2732 handleStreamsGroupHeartbeat",
            note="Whether the coordinator filters topics matched by source_topic_regex by"
            " DESCRIBE (as for consumer regexes) was not established.",
            certain=False,
        ),
    )),
    Api(89, "STREAMS_GROUP_DESCRIBE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.GROUP, "group_ids[]"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "groups[].error_code (error_message null)",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:groups[].topology.subtopologies[]"
                           " source/repartition sink/repartition source/changelog topics"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "groups[].error_code, .error_message (members [], topology null)",
                    "The described group uses topics that the client is not authorized to"
                    " describe.",
                    note="One denied topic replaces the whole group entry. " + DESCRIBED_TOPIC_NOTE,
                ),
            ),
            preconditions=("First: streams groups disabled: UNSUPPORTED_VERSION (35).",),
            authorized_ops=(AuthorizedOps(
                "groups[].authorized_operations", Res.GROUP, "groups[].group_id",
                "include_authorized_operations", note="Only for groups whose error_code is 0.",
            ),),
            source=f"{KA}:2862 handleStreamsGroupDescribe",
        ),
    )),
    Api(90, "DESCRIBE_SHARE_GROUP_OFFSETS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DESCRIBE, Res.GROUP, "groups[].group_id"),),
                    Failure.PER_ENTRY, Err.GROUP_AUTHORIZATION_FAILED,
                    "groups[].error_code (error_message null)",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "groups[].topics[].topic_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "groups[].topics[].partitions[].error_code, .error_message (topic_id zero,"
                    " start_offset -1, lag -1)", MSG_TOPIC,
                    when="groups[].topics not null",
                ),
                Check(
                    (Grant(Op.DESCRIBE, Res.TOPIC, "response:groups[].topics[].topic_name"),),
                    Failure.FILTERED, None, when="groups[].topics null (all topics)",
                ),
            ),
            preconditions=(
                "Per group, first: share groups disabled: that group's error_code"
                " UNSUPPORTED_VERSION (35).",
            ),
            source=f"{KA}:3732 handleDescribeShareGroupOffsetsRequest, :3771, :3797",
        ),
    )),
    Api(91, "ALTER_SHARE_GROUP_OFFSETS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.READ, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED,
                    "error_code, error_message", MSG_GROUP,
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC, "topics[].topic_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].partitions[].error_code, .error_message", MSG_TOPIC,
                    note="Authorized topics that do not exist: UNKNOWN_TOPIC_OR_PARTITION (3).",
                ),
            ),
            preconditions=("First: " + SHARE_ENABLED + ".",),
            source=f"{KA}:3846 handleAlterShareGroupOffsetsRequest",
        ),
    )),
    Api(92, "DELETE_SHARE_GROUP_OFFSETS", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(
                Check(
                    (Grant(Op.DELETE, Res.GROUP, "group_id"),),
                    Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED,
                    "error_code, error_message", MSG_GROUP,
                ),
                Check(
                    (Grant(Op.READ, Res.TOPIC, "topics[].topic_name"),),
                    Failure.PER_ENTRY, Err.TOPIC_AUTHORIZATION_FAILED,
                    "responses[].error_code, .error_message", MSG_TOPIC,
                    note="READ on the topic, not DELETE.",
                ),
            ),
            preconditions=("First: " + SHARE_ENABLED + ".",),
            source=f"{KA}:3897 handleDeleteShareGroupOffsetsRequest",
        ),
    )),
    Api(93, "STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE", (
        Handling(
            Listener.BROKER, Mode.LOCAL,
            checks=(Check(
                (Grant(Op.READ, Res.GROUP, "group_id"),),
                Failure.TOP_LEVEL, Err.GROUP_AUTHORIZATION_FAILED,
                "error_code, error_message", MSG_GROUP,
            ),),
            preconditions=("First: streams groups disabled: UNSUPPORTED_VERSION (35).",),
            source="4.4.0 KafkaApis.handleStreamsGroupTopologyDescriptionUpdate (bytecode; not"
            " in 4.2.1)",
            note="No topic check in KafkaApis, and the 4.4 group coordinator asks no ACL for it.",
        ),
    )),
    Api(94, "UNREGISTER_CONTROLLER", (
        BROKER_FORWARDED,
        Handling(
            Listener.CONTROLLER, Mode.LOCAL,
            checks=(_inter_node(Op.ALTER, where="error_code, error_message",
                                message=MSG_NEEDS_PERMISSION),),
            source="4.4.0 ControllerApis.handleUnregisterController (bytecode; not in 4.2.1)",
        ),
    )),
)
"""Every API a Kafka 4.4 broker or controller listener serves, by key."""

BY_NAME: dict[str, Api] = {api.name: api for api in APIS}
BY_KEY: dict[int, Api] = {api.key: api for api in APIS}
