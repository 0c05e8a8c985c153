"""KIP-714 client telemetry on a broker: the subscriptions and pushes
(``client_metrics_manager``, Kafka's ClientMetricsManager), the OTLP payloads (``otlp``)
and the receiver that keeps what clients pushed for ``/metrics``
(``client_telemetry_exporter``). Sans-I/O: every decision takes ``now_ms``."""
