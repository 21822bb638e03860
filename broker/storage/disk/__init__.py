"""The data directory (issue 27, cluster-and-durability.md section 3): its lock and metadata, the coordinator
journal with its snapshots, and the partition logs' segment files. Memory-only brokers never import it."""
