"""Client quotas on the broker (Kafka's ClientQuotaManager and its Rate): sans-I/O."""
