"""Lint and format: ruff with the project's configuration (``[tool.ruff]`` in pyproject.toml) finds nothing and
would reformat nothing; mypy passes on ``audit/``."""

from __future__ import annotations

import subprocess
from pathlib import Path
import sys

import pytest

from .paths import REPO


def test_ruff_finds_nothing():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_format_would_change_nothing():
    """``ruff format --check``: every file is as ``ruff format`` writes it (run ``ruff format .`` to fix)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing():
    """The type hints of ``audit/`` hold, at the strictness ``[tool.mypy]`` in pyproject.toml sets."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental"], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_import_layers_hold():
    """``lint-imports`` (import-linter): the layer and independence contracts of ``[tool.importlinter]`` in
    pyproject.toml hold, so no import cycle and no import up the layers can come back unnoticed."""
    import shutil

    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    proc = subprocess.run(
        [exe, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300, env=_with_repo_on_path()
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout, proc.stdout[-2000:]


def _with_repo_on_path() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def test_every_package_is_installed():
    """``pyproject.toml`` lists the packages a ``pip install .`` installs: every directory of ``audit/`` with an
    ``__init__.py`` is among them (one left out imports in a checkout and fails when installed)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "audit").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"


#: the most lines a function of audit/ may have, its docstring aside
MAX_FUNCTION_LINES = 80


def test_functions_are_short():
    """No function of ``audit/`` is over :data:`MAX_FUNCTION_LINES` lines, its docstring aside (ruff's C901 and
    PLR0915 bound its branches and statements)."""
    import ast

    over = {}
    for path in sorted((REPO / "audit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines -= first.end_lineno - first.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                over[f"{path.relative_to(REPO).as_posix()}:{node.name}"] = lines
    assert not over, f"split these functions (lines, docstring aside): {over}"


#: the most lines a module of audit/ may have (one concern a module)
MAX_MODULE_LINES = 600


def test_modules_are_small():
    """No module of ``audit/`` is over :data:`MAX_MODULE_LINES` lines: a larger one is split along its concerns."""
    over = {
        path.relative_to(REPO).as_posix(): n
        for path in sorted((REPO / "audit").rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not over, f"split these modules along their concerns (lines): {over}"
