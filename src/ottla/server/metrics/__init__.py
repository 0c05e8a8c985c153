"""What a node serves on ``prometheus.listener`` (docs/observability.md): Kafka's metrics
under the names Prometheus' JMX exporter gives Kafka's MBeans (``jmx_names``).

The request path only adds to plain counters (``request_metrics`` here, the broker's
``BrokerTopicStats``, the replica manager's ISR counts, the followers' lags,
``log_flush_stats``' segment flush times); collectors turn those and the
node's state into metric families when ``/metrics`` is scraped (``request_collector``,
``broker_collectors``, ``controller_collector``), on the node's event loop
(``endpoint``), each node with a registry of its own (``node_metrics``).
``prometheus_client`` is imported only by the modules that build families and serve
them, and the node imports those only when the listener is set (prometheus_client
takes a noticeable share of a node's start).
"""
