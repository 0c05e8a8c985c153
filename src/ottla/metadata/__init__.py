"""Cluster metadata: the records of ``__cluster_metadata`` and the image brokers serve."""
