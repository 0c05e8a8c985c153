"""Fault testing over real processes (issue 34): a history of what clients did and a
checker of Kafka's guarantees over it, a fault proxy for inter-node links, and the
``ottla chaos run`` harness that starts a cluster, injects faults and runs workloads.
Only the CLI imports this package."""
