"""Replication on a broker: the partitions it hosts (state, log, leader or follower), the
fetchers that follow leaders, ISR changes sent to the controller, and replication
throttles."""
