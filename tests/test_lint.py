"""Lint: ruff with the project's configuration (``[tool.ruff]`` in pyproject.toml) finds nothing."""
from __future__ import annotations

import subprocess
import sys

from .paths import REPO


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_finds_nothing():
    """The type hints of ``audit/`` hold, at the strictness ``[tool.mypy]`` in pyproject.toml sets."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
