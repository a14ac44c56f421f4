"""The documentation: the MkDocs site builds with ``--strict`` (a broken link, a missing anchor or a page left out
of the nav fails), the column reference is the one generated from the output contract, and the user-facing files
speak of the product, never of how it was developed."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from audit import __version__
from audit.tables import TABLES, markdown

from .paths import REPO

#: the files a user reads
USER_FILES = [
    "README.md",
    "CHANGELOG.md",
    "airflow_dags/README.md",
    "bench/README.md",
    *[str(p.relative_to(REPO)) for p in sorted((REPO / "docs").glob("*.md"))],
]
DEVELOPMENT_WORDS = re.compile(
    r"(?i)\bissue\s+#?\d+|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|"
    r"tenth|this|last|next|previous|earlier) sessions?\b"
)


def test_the_site_builds_strict(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for page in ("findings", "columns", "troubleshooting", "spark-cluster"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    assert "LOG_TRUNCATION" in (tmp_path / "site" / "findings" / "index.html").read_text()


def test_every_output_column_is_in_the_generated_reference():
    text = (REPO / "docs" / "columns.md").read_text()
    assert text == markdown(), "docs/columns.md is stale: python -m audit.tables > docs/columns.md"
    for name, cols in TABLES.items():
        section = text.split(f"## `{name}/`", 1)[1].split("\n## ", 1)[0]
        documented = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
        assert documented == [c.name for c in cols], name


def test_the_readme_is_short_and_user_files_speak_of_the_product():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
    for name in USER_FILES:
        hits = DEVELOPMENT_WORDS.findall((REPO / name).read_text())
        assert not hits, (name, hits)
    assert not list((REPO / "bench").glob("issue*"))


def test_version(capsys):
    from audit.cli import main

    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"kafka-offset-audit {__version__}"
    assert f'version = "{__version__}"' in (REPO / "pyproject.toml").read_text()
    assert f"## [{__version__}]" in (REPO / "CHANGELOG.md").read_text()
