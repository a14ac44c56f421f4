"""Headless Chromium (Debian's, driven by Playwright) with every non-file request recorded:
the Data Docs site opens complete offline, and report.html for 10,000 groups and 100,000 findings
stays small, opens fast and pages its findings."""

from __future__ import annotations

import glob
import json
import os
import time

import pytest

from ..paths import SCENARIO

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"{CHROMIUM} not found: install Debian's chromium package (apt-get install -y chromium)",
)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Visit:
    """Open a file:// page; record every request, failed request and page error."""

    def __init__(self, browser, path: str):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.requests, self.failed, self.errors = [], [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url}: {r.failure}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        started = time.perf_counter()
        self.page.goto("file://" + os.path.abspath(path), wait_until="load")
        self.load_seconds = time.perf_counter() - started

    @property
    def remote(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("file:", "data:"))]


@needs_chromium
def test_harness_sees_remote_requests(browser, tmp_path):
    """The check below can fail: a page loading a CDN script is caught (the request fails: no network)."""
    page = tmp_path / "cdn.html"
    page.write_text(
        '<!DOCTYPE html><html><head><script src="https://code.jquery.com/jquery-3.7.1.min.js">'
        "</script></head><body>x</body></html>"
    )
    v = Visit(browser, str(page))
    assert v.remote == ["https://code.jquery.com/jquery-3.7.1.min.js"] and v.failed
    v.page.close()


@needs_chromium
def test_data_docs_open_complete_offline(audit_dirs, browser):
    _result, out = audit_dirs("docs-offline", [SCENARIO / "brokers"], reports=True, fail_on="never")
    pages = sorted(glob.glob(str(out / "data_docs" / "**" / "*.html"), recursive=True))
    validation = json.loads((out / "expectations" / "validation_result.json").read_text())
    assets = validation["validation_results"]
    assert len(pages) >= 1 + 2 * len(assets)  # index, one suite page and one validation page per asset
    for path in pages:
        v = Visit(browser, path)
        assert v.remote == [] and v.failed == [] and v.errors == [], (path, v.remote, v.failed, v.errors)
        # the vendored Bootstrap styles the page (without it the body falls back to the browser's serif font)
        assert "Segoe UI" in v.page.evaluate("getComputedStyle(document.body).fontFamily")
        if path.endswith(os.sep + "index.html") and os.path.dirname(path) == str(out / "data_docs"):
            # the index's validation and suite lists are built by script from embedded data
            rows = v.page.locator("table tbody tr")
            assert rows.count() == 2 * len(assets)
            text = v.page.locator("table").first.inner_text()
            assert all(name in text for name in assets)
            link = v.page.locator("tr.clickable-row").first.get_attribute("data-href")
            assert link and os.path.isfile(os.path.join(out / "data_docs", link))
        v.page.close()


# --------------------------------------------------------------------------- a report at cluster scale

N_GROUPS, N_FINDINGS, N_TOPICS, N_PARTITIONS = 10_000, 100_000, 100, 100


def _write_large_output(spark, out: str) -> None:
    """An output dir with 10,000 groups and 100,000 findings over 10,000 topic-partitions, each finding with a
    realistic detail text, plus committed_offsets, epochs and bounds (Spark-generated, written as Parquet)."""
    from pyspark.sql import functions as F

    ids = (
        spark.range(N_FINDINGS)
        .withColumn("g", F.col("id") % N_GROUPS)
        .withColumn("tp", F.col("id") % (N_TOPICS * N_PARTITIONS))
    )
    sev = F.element_at(
        F.array(*[F.lit(s) for s in ("critical", "error", "warning", "info")]), (F.col("id") % 4 + 1).cast("int")
    )
    name = F.element_at(
        F.array(*[F.lit(s) for s in ("LOG_TRUNCATION", "OFFSET_OUT_OF_RANGE", "OFFSET_REWIND", "EPOCH_UNVERIFIABLE")]),
        (F.col("id") % 4 + 1).cast("int"),
    )
    topic = F.concat(F.lit("orders.region-"), (F.col("tp") % N_TOPICS).cast("string"))
    part = (F.col("tp") / N_TOPICS).cast("int")
    findings = ids.select(
        F.concat(F.lit("payments-consumer-"), F.col("g").cast("string")).alias("group_id"),
        topic.alias("topic"),
        part.alias("partition"),
        name.alias("finding"),
        sev.alias("severity"),
        (F.col("id") + 1000).alias("committed_offset"),
        F.lit(3).alias("committed_leader_epoch"),
        F.lit("2026-11-22 07:00:00").cast("timestamp").alias("commit_timestamp"),
        F.when(name == "LOG_TRUNCATION", F.col("id") + 900).alias("divergence_offset"),
        (F.col("id") % 997).alias("records_at_risk"),
        F.lit(None).cast("bigint").alias("epoch_end_offset"),
        F.lit(0).cast("bigint").alias("log_start_offset"),
        (F.col("id") + 1500).alias("log_end_offset"),
        F.lit(None).cast("bigint").alias("previous_offset"),
        F.lit(None).cast("int").alias("previous_leader_epoch"),
        F.lit(1).alias("answered_by_broker"),
        F.concat(
            F.lit("Committed offset "),
            (F.col("id") + 1000).cast("string"),
            F.lit(" (leader epoch 3) is past the divergence point: the leader's epoch 3 ends at offset "),
            (F.col("id") + 900).cast("string"),
            F.lit(
                ". Risk: Kafka's consumer will raise LogTruncationException or rewind and replay records. "
                "Action: check downstream for the affected range, then kafka-consumer-groups --bootstrap-server "
                "<broker> --group <group> --reset-offsets --to-offset <divergence> --execute."
            ),
        ).alias("detail"),
        F.lit(None).cast("string").alias("cause"),
        F.lit(None).cast("int").alias("cause_leader_epoch"),
        F.lit(None).cast("int").alias("cause_leader"),
        F.lit(None).cast("timestamp").alias("cause_time"),
        F.lit(None).cast("int").alias("replica_broker"),
        F.lit(None).cast("array<string>").alias("groups_consumed"),
        F.lit(None).cast("bigint").alias("offset_at_expansion"),
        F.lit(None).cast("int").alias("expansion_partition"),
    )
    findings.write.parquet(f"{out}/findings")
    findings.select(
        "group_id",
        "topic",
        "partition",
        "committed_offset",
        "committed_leader_epoch",
        F.lit(None).cast("string").alias("metadata"),
        "commit_timestamp",
        F.lit(3).cast("short").alias("value_version"),
        F.col("finding").alias("verdict"),
    ).write.parquet(f"{out}/committed_offsets")
    tps = spark.range(N_TOPICS * N_PARTITIONS).select(
        F.concat(F.lit("orders.region-"), (F.col("id") % N_TOPICS).cast("string")).alias("topic"),
        (F.col("id") / N_TOPICS).cast("int").alias("partition"),
    )
    (
        tps.crossJoin(spark.range(3).select((F.col("id") + 1).cast("int").alias("broker_id")))
        .crossJoin(spark.range(4).select(F.col("id").cast("int").alias("leader_epoch")))
        .select(
            "topic",
            "partition",
            "broker_id",
            "leader_epoch",
            (F.col("leader_epoch") * 500).cast("bigint").alias("start_offset"),
            (F.col("broker_id") == 1).alias("is_leader"),
        )
    ).write.parquet(f"{out}/epochs")
    tps.select(
        "topic",
        "partition",
        F.lit(0).cast("bigint").alias("log_start_offset"),
        F.lit(101500).cast("bigint").alias("log_end_offset"),
        F.lit(101500).cast("bigint").alias("high_watermark"),
        F.lit(1).alias("leader_id"),
    ).write.parquet(f"{out}/bounds")
    with open(f"{out}/summary.json", "w") as fh:
        json.dump(
            {
                "tool": "kafka-offset-audit",
                "findings": {
                    "total": N_FINDINGS,
                    "by_severity": {s: N_FINDINGS // 4 for s in ("critical", "error", "warning", "info")},
                },
            },
            fh,
        )


@pytest.fixture(scope="module")
def large_report(spark, tmp_path_factory):
    from audit.report.html import write_html_report

    out = str(tmp_path_factory.mktemp("large-report") / "out")
    _write_large_output(spark, out)
    started = time.perf_counter()
    path = write_html_report(spark, out)
    return path, time.perf_counter() - started


@needs_chromium
def test_large_report_is_small_fast_and_paged(large_report, browser):
    path, build_seconds = large_report
    size = os.path.getsize(path)
    assert size < 20 * 1024 * 1024, f"report.html is {size / 2**20:.1f} MiB"
    v = Visit(browser, path)
    assert v.remote == [] and v.failed == [] and v.errors == [], (v.remote, v.failed, v.errors)
    # navigation start to the load event, as the browser measured it
    load_ms = v.page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    print(
        f"large report: {size / 2**20:.1f} MiB, built in {build_seconds:.1f} s, load event at {load_ms:.0f} ms "
        f"(goto {v.load_seconds:.2f} s)"
    )
    page = v.page
    # the page holds the findings it lists, not all 100,000 (the work a browser does; no wall-clock bound)
    assert page.locator("#findings-table tbody.finding").count() == 5000
    visible = lambda: page.locator("#findings-table tbody.finding:visible")  # noqa: E731
    assert visible().count() == 100
    assert page.locator("#page-info").inner_text() == "page 1 of 50"
    assert "Only the first 5000 of 100000 findings are shown" in page.content()
    assert page.locator("#shown-count").inner_text() == "5000"
    first = visible().first.get_attribute("data-severity")
    page.click("#page-next")
    assert page.locator("#page-info").inner_text() == "page 2 of 50" and visible().count() == 100
    page.select_option("#sev-filter", "critical")
    assert page.locator("#page-info").inner_text() == "page 1 of 50"  # the 5000 listed are all critical
    assert first == "critical"
    page.fill("#text-filter", "payments-consumer-4\u0020")  # no group id ends with a space: nothing matches
    assert page.locator("#shown-count").inner_text() == "0" and visible().count() == 0
    # plots: only the partitions with the most records at risk, and a count of the rest
    assert page.locator("figure.partition-plot").count() == 20
    assert (
        "9980 more topic-partitions have findings but are not plotted" in page.locator("#plots-left-out").inner_text()
    )
    page.close()
