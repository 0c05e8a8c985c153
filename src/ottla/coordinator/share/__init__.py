"""The share coordinator (KIP-932): the durable state of share-partitions (their start
offsets and the delivery state of the records in flight), kept in ``__share_group_state``
as snapshots and the updates written between them."""
