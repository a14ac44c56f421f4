"""Self-contained HTML report (audit/report/html.py), including a real headless Chromium run."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from html.parser import HTMLParser
from typing import Dict, List, Optional, Tuple

import pytest

try:
    from tests.conftest_reports import report_spark  # noqa: F401  (fixture)
    from tests import report_fixtures as rf
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    from conftest_reports import report_spark  # noqa: F401
    import report_fixtures as rf

from audit.report.html import write_html_report

CHROMIUM = "/usr/bin/chromium"
TRUNCATED = [("dev.payments", 0, 60), ("dev.payments", 1, 50), ("dev.inventory", 2, 50)]
# partitions with any finding in the fixture
PARTITIONS_WITH_FINDINGS = {
    "dev.payments-0",
    "dev.payments-1",
    "dev.inventory-0",
    "dev.inventory-1",
    "dev.inventory-2",
    "dev.audit-0",
}


class _Page(HTMLParser):
    """Just enough of the report's structure for the assertions."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: List[str] = []
        self.in_findings_body = False
        self.finding_rows: List[Dict[str, str]] = []  # one <tbody class="finding"> each
        self.detail_rows = 0
        self.figures: List[Dict[str, str]] = []
        self.imgs: List[Tuple[Optional[str], Dict[str, str]]] = []  # (figure id, attrs)
        self.scripts: List[Dict[str, str]] = []
        self.links: List[Dict[str, str]] = []
        self.body_attrs: Dict[str, str] = {}
        self._table_id: Optional[str] = None
        self._figure: Optional[str] = None

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        if tag == "body":
            self.body_attrs = a
        elif tag == "table":
            self._table_id = a.get("id")
        elif tag == "tbody" and self._table_id == "findings-table":
            self.in_findings_body = True
            if "finding" in a.get("class", "").split():
                self.finding_rows.append(a)
        elif tag == "tr" and self.in_findings_body:
            self.detail_rows += "detail-row" in a.get("class", "")
        elif tag == "figure":
            self._figure = a.get("id")
            if "partition-plot" in a.get("class", ""):
                self.figures.append(a)
        elif tag == "img":
            self.imgs.append((self._figure, a))
        elif tag == "script":
            self.scripts.append(a)
        elif tag == "link":
            self.links.append(a)

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_findings_body = False
        elif tag == "figure":
            self._figure = None


def _parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


@pytest.fixture(scope="module")
def truncated_report(report_spark, tmp_path_factory) -> Tuple[str, str]:
    out = rf.write_fake_output(report_spark, str(tmp_path_factory.mktemp("report") / "out"), with_truncation=True)
    path = write_html_report(report_spark, out)
    with open(path, encoding="utf-8") as fh:
        return path, fh.read()


def test_report_written_to_output_dir(truncated_report):
    path, text = truncated_report
    assert os.path.basename(path) == "report.html" and os.path.isfile(path)
    assert text.startswith("<!DOCTYPE html>")


def test_findings_table_sorted_by_severity_with_actions(truncated_report):
    _, text = truncated_report
    page = _parse(text)
    rows = page.finding_rows
    assert len(rows) == 14
    assert page.detail_rows == 14
    order = {"critical": 0, "error": 1, "warning": 2, "info": 3}
    ranks = [order[r["data-severity"]] for r in rows]
    assert ranks == sorted(ranks)
    assert [r["data-finding"] for r in rows[:3]] == ["LOG_TRUNCATION"] * 3
    # the action text of the findings is shown
    assert "kafka-consumer-groups --reset-offsets --to-offset 60" in text
    assert "kafka-consumer-groups --reset-offsets --to-offset 50" in text
    # run summary figures
    assert "Records read by type" in text and "corrupt_batch" in text
    assert "00000000000000000000.log" in text  # where data was skipped


def test_truncation_cause_is_shown_under_the_finding(truncated_report):
    _, text = truncated_report
    assert text.count('class="cause"') == 3
    assert "unclean election: epoch 2, leader 2, at 2026-11-22 07:14:55" in text
    assert ">stale client epoch</small>" in text


def test_one_plot_per_partition_with_findings(truncated_report):
    _, text = truncated_report
    page = _parse(text)
    plotted = {f"{f['data-topic']}-{f['data-partition']}": f for f in page.figures}
    assert set(plotted) == PARTITIONS_WITH_FINDINGS
    assert len(page.figures) == len(PARTITIONS_WITH_FINDINGS)
    for topic, partition, divergence in TRUNCATED:
        fig = plotted[f"{topic}-{partition}"]
        assert fig["data-divergence"] == str(divergence)
        imgs = [a for fid, a in page.imgs if fid == fig["id"]]
        assert len(imgs) == 1
        assert imgs[0]["src"].startswith("data:image/svg+xml;base64,")
        assert len(imgs[0]["src"]) > 5000
        svg = base64.b64decode(imgs[0]["src"].split(",", 1)[1]).decode("utf-8")
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg
        assert f"diverges at {divergence}</text>" in svg  # text kept as text, not glyph paths
    # the findings-per-group chart
    assert any(a.get("id") == "group-chart" for _, a in page.imgs)


def test_report_is_self_contained(truncated_report):
    _, text = truncated_report
    page = _parse(text)
    assert all("src" not in s for s in page.scripts), "no external scripts"
    assert page.links == [], "no <link> (stylesheets, fonts)"
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert "@import" not in text and "@font-face" not in text
    for _, a in page.imgs:
        assert a["src"].startswith("data:")


@pytest.mark.slow
def test_caps_are_reported(report_spark, tmp_path):
    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=True)
    text = open(
        write_html_report(report_spark, out, max_findings=5, max_plots=2, max_groups_in_chart=2), encoding="utf-8"
    ).read()
    page = _parse(text)
    assert len(page.finding_rows) == 5
    assert all(r["data-severity"] in ("critical", "error") for r in page.finding_rows)
    assert "Only the first 5 of 14 findings are shown" in text
    assert len(page.figures) == 2
    assert {f"{f['data-topic']}-{f['data-partition']}" for f in page.figures} <= {f"{t}-{p}" for t, p, _ in TRUNCATED}
    assert "4 more topic-partitions have findings but are not plotted" in text
    assert "3 more groups with findings are not in the chart" in text


def test_no_findings(report_spark, tmp_path):
    def no_findings(tables):
        tables["findings"] = []
        for c in tables["committed_offsets"]:
            c["verdict"] = "OK"

    out = rf.write_fake_output(report_spark, str(tmp_path / "out"), with_truncation=False, mutate=no_findings)
    text = open(write_html_report(report_spark, out), encoding="utf-8").read()
    page = _parse(text)
    assert page.finding_rows == [] and page.figures == []
    assert "No findings" in text and "No partition has a finding" in text


# ------------------------------------------------------------------ real browser


def _chromium(url: str, profile_dir: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile_dir}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        *args,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console_messages(stderr: str) -> List[str]:
    # Chromium logs every page console message (and uncaught exception) as ":CONSOLE" lines.
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _body_attrs(dom: str) -> Dict[str, str]:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, dom[:500]
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} not found: install Debian's chromium package (apt-get install -y chromium)",
)


@needs_chromium
def test_harness_detects_broken_page(tmp_path):
    """The browser check below must be able to fail: a page with errors is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><img class='plot' src='data:image/png;base64,AAAA'>"
        "<script>console.error('boom'); noSuchFunction();</script></body></html>"
    )
    proc = _chromium(page.as_uri(), str(tmp_path / "profile"), "--dump-dom")
    messages = _console_messages(proc.stderr)
    assert any("boom" in m for m in messages)
    assert any("noSuchFunction" in m for m in messages)


@needs_chromium
def test_report_renders_in_headless_chromium(truncated_report, tmp_path):
    path, _ = truncated_report
    url = "file://" + os.path.abspath(path)
    proc = _chromium(url, str(tmp_path / "profile"), "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _console_messages(proc.stderr) == []
    attrs = _body_attrs(proc.stdout)
    assert attrs.get("data-report-ready") == "1", "the page's load handler did not run"
    assert attrs["data-errors"] == "0", attrs.get("data-error-text")
    assert attrs["data-table-rows"] == "14"
    # one plot per partition with findings + the per-group chart, all decoded by the browser
    assert attrs["data-plots-rendered"] == str(len(PARTITIONS_WITH_FINDINGS) + 1)
    assert attrs["data-plots-broken"] == "0"
    assert 'id="findings-table"' in proc.stdout

    shot = tmp_path / "report.png"
    proc = _chromium(
        url, str(tmp_path / "profile2"), f"--screenshot={shot}", "--window-size=1400,2400", "--hide-scrollbars"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _console_messages(proc.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000


def test_unclean_elections_marked_and_incident_timeline_in_time_order(spark, scenario_latest, tmp_path):
    """The shared scenario's report (its real outputs): dev.payments-0's figure carries the unclean election of
    epoch 2 (broker 2, KIP-704 RECOVERING in the metadata log) in a timeline ordered by time, before the
    group's commit and the LOG_TRUNCATION the audit found; the owner of dev-clickstream's partitions shows."""
    _result, out = scenario_latest
    path = write_html_report(spark, str(tmp_path), tables_dir=str(out))
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    fig = re.search(r'<figure class="partition-plot" id="plot-dev\.payments-0".*?</figure>', text, re.S).group(0)
    items = re.findall(r"<li class=\"ev-(\w+)\"><span class=\"when\">([^<]*)</span>([^<]*)</li>", fig)
    kinds = [k for k, _w, _t in items]
    assert "unclean" in kinds and "commit" in kinds and kinds[-1] == "finding"
    unclean = [t for k, _w, t in items if k == "unclean"]
    assert len(unclean) == 1 and "leader epoch 2 began, leader broker 2" in unclean[0]
    times = [w for k, w, _t in items if k in ("epoch", "unclean", "commit") and w != "from snapshot"]
    assert times == sorted(times) and len(times) >= 3
    assert kinds.index("unclean") < max(i for i, k in enumerate(kinds) if k == "commit")
    assert "LOG_TRUNCATION for group dev-settlement: unclean_election" in fig
    # the fencing of the brokers that led it (broker_timeline/), in the same order
    brokers = [t for k, _w, t in items if k == "broker"]
    assert any("fenced" in t for t in brokers), brokers


@pytest.mark.slow
def test_audit_report_from_its_tables_in_memory_equals_one_read_from_its_files(spark, audit_dirs, tmp_path):
    """The audit builds report.html from its materialised tables (not read back from the staged Parquet files):
    every part of the page drawn from the tables (what to do, changes, findings, per-group chart, partition plots)
    is the same, to the byte, as in a page written afterwards from the output directory's files.  (The run summary
    at the end differs: the audit rewrites summary.json after its reports.)  With --history, so finding_changes/ is among
    the tables."""
    from ..paths import SCENARIO

    result, out = audit_dirs(
        "report-in-memory", [SCENARIO / "brokers"], reports=True, history=str(tmp_path / "history")
    )
    assert result.summary["reports"]["html_report"] == "report.html"
    (tmp_path / "again").mkdir()
    path = write_html_report(spark, str(tmp_path / "again"), display_dir=str(out), tables_dir=str(out))

    def tables_part(p):
        with open(p, encoding="utf-8") as fh:
            text = fh.read()
        return text[text.index('<section id="todo"') : text.index('<section id="summary"')]

    mine, theirs = tables_part(out / "report.html"), tables_part(path)
    assert 'class="partition-plot"' in mine and "LOG_TRUNCATION" in mine and "group-chart" in mine
    assert '<section id="changes"' in mine
    assert mine == theirs
