"""Our broker and librdkafka's mock cluster, side by side: ``python -m benchmarks`` (see README.md)."""
