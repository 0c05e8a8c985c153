"""Apache Kafka 4.4 itself, run beside Ottla as the tests' oracle and the benchmarks' anchor.

``install`` resolves Kafka's jars with Maven into a cache outside the repository
(``~/.cache/ottla/kafka-4.4.0/libs``, or ``$OTTLA_KAFKA_HOME/libs``); ``cluster`` starts real
Kafka nodes from them on free ports and runs Kafka's own command-line tools. See
docs/kafka-ref.md.
"""
