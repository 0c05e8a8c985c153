"""The QuorumController: admin operations turned into metadata records, sans-I/O."""
