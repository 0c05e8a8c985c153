"""Clients Ottla uses to talk to Kafka-protocol servers (itself included)."""
