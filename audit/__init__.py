"""kafka-offset-audit: a PySpark batch auditor for Kafka consumer offset integrity."""

__version__ = "0.1.0"
