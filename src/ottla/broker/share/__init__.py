"""Share groups on a broker (KIP-932): the share-partitions this broker leads, the members'
share sessions, the persister of their state, the dead-letter queue, and the share-group
offsets admin."""
