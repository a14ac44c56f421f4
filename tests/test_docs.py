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


#: the pages a user reads for the CLI: the README and the site's top-level pages (the research page under
#: docs/design/ quotes Kafka's own tools)
CLI_DOC_FILES = ["README.md", *[str(p.relative_to(REPO)) for p in sorted((REPO / "docs").glob("*.md"))]]
#: an option as the pages write it: ``--fail-on``, ``--offsets-decoder``, not a Markdown rule or a ``---`` line
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
#: the options of other tools the pages mention, by tool; a flag of kafka-offset-audit must not be listed here
OTHER_TOOLS_FLAGS = {
    # spark-submit
    "--archives",
    "--class",
    "--packages",
    # kafka-consumer-groups, kafka-acls and kafka-dump-log
    "--all-groups",
    "--describe",
    "--execute",
    "--group",
    "--reset-offsets",
    "--to-offset",
    "--from-file",
    "--dry-run",
    "--topic",
    "--add",
    "--allow-principal",
    "--operation",
    "--offsets-decoder",
    "--remote-log-metadata-decoder",
    # rsync
    "--filter",
    # pytest and pytest-xdist
    "--dist",
    # pip
    "--no-deps",
    # the project's benchmarks, fuzzing and lab soak (python -m bench.*)
    "--out",
    "--pairs",
    "--sources",
    "--seconds",
    "--jobs",
    "--runs",
    "--fresh",
    "--write-seeds",
    "--seeds",
    "--versions",
    "--no-share",
    "--no-streams",
    "--connect-only",
    "--connect-warmup",
    "--connect-python-env",
    "--n",  # bench.generate
    "--warm",  # bench.small_audit
}


def cli_flags() -> set[str]:
    """Every option string of the CLI's parser: the top level and its subcommands."""
    import argparse

    from audit.cli import build_parser

    parser = build_parser()
    flags = {o for a in parser._actions for o in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():  # every subcommand
                flags |= {o for a in sub._actions for o in a.option_strings}
    return flags


def unknown_flags(text: str, known: set[str]) -> set[str]:
    """The ``--flags`` of ``text`` that are neither the CLI's (``known``) nor another tool's."""
    return {f for f in FLAG.findall(text) if f not in known and f not in OTHER_TOOLS_FLAGS}


def test_every_flag_the_docs_mention_exists():
    known = cli_flags()
    assert not (known & OTHER_TOOLS_FLAGS), "a CLI flag is in the other tools' allow-list"
    for name in CLI_DOC_FILES:
        assert not unknown_flags((REPO / name).read_text(), known), name
    # a wrong flag is caught
    assert unknown_flags("kafka-offset-audit audit --fail-onn error --log-dirs d", known) == {"--fail-onn"}


#: a metric as the pages write it: ``kafka_offset_audit_lag_offsets``, or ``_group_max_lag_offsets`` in a list
#: that began with the full name
METRIC = re.compile(r"\bkafka_offset_audit_[a-z0-9_]*[a-z0-9]")
METRIC_SHORT = re.compile(r"`(_[a-z][a-z0-9_]*[a-z0-9])(?:\{[a-z_,]*\})?`")


def registered_metrics() -> set[str]:
    """The metric names ``audit/report/metrics.py`` registers, from registries built for a completed and a failed
    run with one row of each kind."""
    from audit.report.metrics import PREFIX, build_registry, failure_registry

    group = dict(
        group_id="g",
        total_lag=1,
        max_lag=1,
        partitions_committed=1,
        partitions_remote=0,
        records_at_risk=0,
        latest_commit_age_seconds=1,
        status="OK",
        worst_verdict="OK",
    )
    lost = dict(topic="t", partition=0, replica_broker=1, severity="error", records_at_risk=1, divergence_offset=1)
    summary = {"exit_status": 0, "elapsed_seconds": 1.0}
    registries = [
        build_registry(summary, [], groups=[group], lost=[lost]),
        build_registry({**summary, "failed_stages": [{"stage": "html_report"}]}, [], success=False),
        failure_registry(1.0, 3, "decode"),
    ]
    names = {m.name for reg in registries for m in reg.collect()}
    assert names and all(n.startswith(PREFIX + "_") for n in names)
    return names


def documented_metrics(text: str) -> set[str]:
    """The metric names ``text`` mentions, the short ``_name`` forms on lines that name a full one expanded."""
    names = set(METRIC.findall(text))
    for line in text.splitlines():
        if METRIC.search(line):
            names |= {"kafka_offset_audit" + short for short in METRIC_SHORT.findall(line)}
    return names


def test_every_metric_the_docs_mention_is_registered():
    registered = registered_metrics()
    assert "kafka_offset_audit_lag_offsets" in registered and "kafka_offset_audit_failed_stage" in registered
    for name in CLI_DOC_FILES:
        assert not documented_metrics((REPO / name).read_text()) - registered, name
    # a wrong name is caught, in full or short form
    planted = "`kafka_offset_audit_lag_offset`, `kafka_offset_audit_records_read`, `_records_skiped{reason}`"
    assert documented_metrics(planted) - registered == {
        "kafka_offset_audit_lag_offset",
        "kafka_offset_audit_records_skiped",
    }
