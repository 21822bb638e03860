"""kafka-group-broker: a broker that speaks Kafka's wire protocol for consumer groups."""

# The one place the version lives: pyproject.toml reads it, `group-broker --version` prints it.
__version__ = "0.1.0"
