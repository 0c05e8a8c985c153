"""The transaction coordinator service on a broker (Kafka's TransactionCoordinator): the
coordinator service over ``__transaction_state`` with transaction shards, producer ids
for them, and the marker channel (``transaction_markers``) that ends each transaction
on its partitions.
"""

from __future__ import annotations

from ottla.broker.context import BrokerContext
from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.broker.coordinators.producer_id_manager import ProducerIdManager
from ottla.broker.coordinators.transaction_markers import TransactionMarkerChannelManager
from ottla.common.features import TRANSACTION_VERSION
from ottla.common.topics import TRANSACTION_STATE_TOPIC, TopicPartition
from ottla.coordinator.runtime import CoordinatorState
from ottla.coordinator.transaction.metadata import TransactionMetadata
from ottla.coordinator.transaction.shard import (
    ProducerIdAndEpoch,
    TransactionConfig,
    TransactionCoordinatorShard,
    decode_record,
    encode_record,
)
from ottla.protocol.errors import ErrorCode, KafkaError


class TransactionCoordinatorService(CoordinatorService[TransactionCoordinatorShard]):
    topic_name = TRANSACTION_STATE_TOPIC
    kind = "transaction coordinator"

    def __init__(self, broker: BrokerContext, producer_ids: ProducerIdManager) -> None:
        config = broker.config
        self.producer_ids = producer_ids
        self.txn_config = TransactionConfig(
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"])
        super().__init__(
            broker, config["transaction.state.log.num.partitions"],
            config["transaction.state.log.replication.factor"],
            {"cleanup.policy": "compact", "compression.type": "uncompressed",
             "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
             "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
             "unclean.leader.election.enable": "false"},
            lambda ctx: TransactionCoordinatorShard(ctx, self.txn_config),
            lambda record: encode_record(record, self._log_value_version()), decode_record)
        self._spare_producer_id: int | None = None
        self.markers = TransactionMarkerChannelManager(broker, self)

    @property
    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` (KIP-890)."""
        return self.broker.image.features.get(TRANSACTION_VERSION, 0)

    def _log_value_version(self) -> int:
        """Kafka's ``transactionLogValueVersion``: the flexible value (which keeps the
        client's transaction version across a failover) from transaction.version 1."""
        return 1 if self.transaction_version >= 1 else 0

    # --- producer ids ---------------------------------------------------------------------

    async def _reserve_producer_id(self) -> None:
        """Have a producer id at hand (from the controller's blocks) for the operation about
        to run, as Kafka's coordinator takes one synchronously."""
        if self._spare_producer_id is None:
            try:
                self._spare_producer_id = await self.producer_ids.generate(
                    self.broker.broker_epoch)
            except (KafkaError, ConnectionError) as e:
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 f"No producer id available yet: {e}") from e

    def _take_producer_id(self) -> int:
        if self._spare_producer_id is None:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "No producer id at hand")
        producer_id, self._spare_producer_id = self._spare_producer_id, None
        return producer_id

    # --- the APIs ---------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> ProducerIdAndEpoch:
        await self._reserve_producer_id()
        answer: ProducerIdAndEpoch = await self.write(
            transactional_id, lambda shard, now: shard.init_producer_id(
                now, transactional_id, timeout_ms, expected, self._take_producer_id))
        self.markers.kick()
        return answer

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: frozenset[TopicPartition],
                             client_version: int = 0) -> ErrorCode:
        error: ErrorCode = await self.write(
            transactional_id, lambda shard, now: shard.add_partitions(
                now, transactional_id, producer_id, producer_epoch, partitions,
                client_version))
        return error

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: frozenset[TopicPartition]
                          ) -> dict[TopicPartition, ErrorCode]:
        found: dict[TopicPartition, ErrorCode] = self.read(
            transactional_id, lambda shard: shard.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions))
        return found

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool, client_version: int = 0
                              ) -> ProducerIdAndEpoch:
        """EndTxn; ``client_version`` 2 (EndTxn v5) bumps the epoch, and may need a new
        producer id when the epoch is exhausted."""
        if client_version >= 2:
            await self._reserve_producer_id()
        answer: ProducerIdAndEpoch = await self.write(
            transactional_id, lambda shard, now: shard.end_transaction(
                now, transactional_id, producer_id, producer_epoch, commit, client_version,
                self._take_producer_id))
        self.markers.kick()
        return answer

    # --- administration (DescribeTransactions, ListTransactions) --------------------------

    async def describe_transaction(self, transactional_id: str) -> TransactionMetadata:
        """The id's state once the log has it committed, from this broker's shard alone:
        NOT_COORDINATOR if another broker leads its partition (and no topic is created),
        COORDINATOR_LOAD_IN_PROGRESS while loading, TRANSACTIONAL_ID_NOT_FOUND."""
        found: TransactionMetadata = await self._read_committed(
            self.partition_for(transactional_id),
            lambda shard: shard.describe(transactional_id))
        return found

    async def transaction_states(self) -> list[TransactionMetadata]:
        """Every transactional id of the partitions this broker leads; as Kafka, one
        partition still loading makes the whole answer COORDINATOR_LOAD_IN_PROGRESS."""
        if self._loading or any(c.state is CoordinatorState.LOADING
                                for c in self.runtime.contexts.values()):
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             "The coordinator is loading")
        found: list[TransactionMetadata] = await self.read_every_shard(
            lambda shard: list(shard.transactions.values()))
        return found

    # --- markers ----------------------------------------------------------------------------

    def on_loaded(self, tp: TopicPartition) -> None:
        self.markers.kick()

    async def close(self) -> None:
        await self.markers.close()
