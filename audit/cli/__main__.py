"""Run the console script as ``python -m audit.cli``.

The same as ``kafka-offset-audit``: :func:`audit.cli.entry` runs :func:`audit.cli.main` and ends the process
with its exit status.
"""

from audit.cli import entry

__all__: list[str] = []

if __name__ == "__main__":
    entry()
