"""Throughput benchmark of kafka-offset-audit (see bench/README.md).

Not part of the installed package and not a test: ``python -m bench.run_benchmark`` prints figures.
"""
