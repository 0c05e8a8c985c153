"""The ``ottla`` command: the node and Kafka's command-line tools, with Kafka's flags."""
