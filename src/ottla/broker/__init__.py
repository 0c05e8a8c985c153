"""The broker: request handlers by API, the replica manager, partitions, fetch sessions."""
