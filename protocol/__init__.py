"""The Kafka wire layer: framing, the supported API table, decoding and encoding."""
