"""Kafka's security model, sans I/O: principals, SASL mechanisms and their credentials."""
