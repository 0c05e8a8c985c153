"""The Kafka wire protocol: framing, request/response codec, error codes, record batches."""
