"""Ottla: an event-streaming platform in Python, wire-compatible with Apache Kafka 4.x."""

__version__ = "0.1.0"
