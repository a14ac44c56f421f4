"""Run many seeded lab scenarios and write the agreement table (outside CI).

    python -m tests.lab.soak --versions 4.4.0,3.9.2 --seeds 1-20 --out bench/lab_soak

For every (version, seed): :func:`tests.lab.scenario.run_scenario` on a fresh cluster; the oracle's verdicts
with the cluster up; the **live** audit (``--bootstrap-servers``) against the running cluster; a clean
shutdown; the **offline** audit of the log dirs and of the **hot** copy taken while the cluster ran. Each audit
is compared with the oracle (:mod:`tests.lab.differential`) and live with offline. Every audit runs as the CLI's
defaults do (reports on: ``report.html`` and the expectation suite; ``--fail-on error``) and must end with exit 0
or 1. Writes ``<out>.md`` (the table) and ``<out>.json`` (every disagreement with its seed, each audit's exit code
and reports). Exit status 1 when anything disagrees or an audit raised or wrote no reports.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from . import differential, kafka_dist, scenario

SOURCES = ("live", "offline", "hot")


def audit(spark, out: Path, *, log_dirs=None, bootstrap=None) -> dict:
    """The audit as the CLI runs it by default (reports on, ``--fail-on error``), quiet, into ``out``.

    Returns ``{"out", "exit_code", "error", "report_html", "validation_result", "summary_reports"}``: the run's exit
    code (None when it raised), the traceback when it raised, whether ``report.html`` and
    ``expectations/validation_result.json`` were written and whether ``summary.json`` has a ``reports`` entry.
    When the audit raises, the same audit runs again without reports (``fallback``) so that the comparison
    still has the output tables; the error stays in the result (and fails ``test_audit_with_reports``).
    """
    from audit.pipeline import AuditConfig, run

    cfg = AuditConfig(
        log_dirs=[str(d) for d in log_dirs or []], bootstrap_servers=bootstrap, output=str(out), quiet=True
    )
    res = {"out": Path(out), "exit_code": None, "error": None, "fallback": False}
    try:
        res["exit_code"] = run(cfg, spark).exit_code
    except Exception:  # noqa: BLE001 - kept, reported and asserted on
        res["error"] = traceback.format_exc()
    summary_path = Path(out) / "summary.json"
    summary = json.loads(summary_path.read_text()) if res["error"] is None and summary_path.exists() else {}
    res.update(
        report_html=res["error"] is None and (Path(out) / "report.html").is_file(),
        validation_result=res["error"] is None and (Path(out) / "expectations" / "validation_result.json").is_file(),
        summary_reports="reports" in summary,
    )
    if res["error"] is not None:
        res["fallback"] = True
        run(cfg.model_copy(update={"reports": False}), spark)
    return res


def _audit_ok(a: dict) -> bool:
    """The audit with reports ran to its end (exit 0 or 1) and wrote report.html and the suite's result."""
    return (
        a["error"] is None
        and a["exit_code"] in (0, 1)
        and a["report_html"]
        and a["validation_result"]
        and a["summary_reports"]
    )


def check_seed(
    seed: int,
    version: str,
    workdir: Path,
    spark,
    sources=SOURCES,
    share: bool = False,
    streams: bool = False,
    kinds: list[str] | None = None,
) -> dict:
    """Run and judge one scenario; returns ``{"seed", "version", "episodes", "rows": {source: rows},
    "live_vs_offline": [...], "causes", "unclean_leader", "audits": {source: audit()'s result}, "outs": {source:
    output dir}, "steps": the scenario's schedule, "share_rows": {source: share_episode.compare_share rows}}``.

    ``share`` (Kafka 4.x): the share-group episodes (``tests/lab/share_episode.py``) run after the seed's plan, on
    a cluster with their settings; their oracle (every share group drained once more, with the cluster up) is
    compared with each audit's ``share_partitions/``.  ``streams`` (Kafka 4.1+): the streams-group episode
    (``tests/lab/streams_episode.py``: a Kafka Streams application whose commits sit past the divergence point) runs
    after them; its group-partitions are judged by Kafka's consumer like every other (``rows``), and
    ``streams_rows`` says per audit which of them the audit placed in a group of ``group_type`` ``streams``.
    ``kinds``: these episodes instead of the seed's plan (:func:`scenario.run_scenario`)."""
    from . import share_episode, streams_episode

    with_share = share and kafka_dist.major(version) >= 4
    with_streams = streams and streams_episode.supported(version)
    overrides: dict = {}
    for on, extra in ((with_share, share_episode.CLUSTER_OVERRIDES), (with_streams, streams_episode.CLUSTER_OVERRIDES)):
        for role, configs in extra.items() if on else ():
            overrides.setdefault(role, {}).update(configs)
    extra_kinds = (list(share_episode.KINDS) if with_share else []) + (
        list(streams_episode.KINDS) if with_streams else []
    )
    sc = scenario.run_scenario(
        seed,
        version,
        workdir,
        hot_copy="hot" in sources,
        kinds=kinds,
        extra_kinds=extra_kinds or None,
        cluster_options={"overrides": overrides} if overrides else None,
    )
    audits = {}
    reader = None
    share_oracle: list = []
    try:
        if with_share:
            share_oracle = share_episode.share_oracle(sc)
        if "live" in sources:
            audits["live"] = audit(spark, workdir / "out-live", bootstrap=sc.cluster.bootstrap)
            reader = differential.reader_agreement(spark, sc.cluster.bootstrap, sc.client)
    finally:
        scenario.finish(sc)
    if "offline" in sources:
        audits["offline"] = audit(spark, workdir / "out-offline", log_dirs=sc.cluster.log_dirs())
    if "hot" in sources:
        audits["hot"] = audit(spark, workdir / "out-hot", log_dirs=sorted((workdir / "hot-copy").iterdir()))
    outs = {s: a["out"] for s, a in audits.items()}
    rows = {
        s: differential.compare(sc.verdicts, o, reference=outs.get("offline") if s == "hot" else None)
        for s, o in outs.items()
    }
    cross = []
    if "live" in rows and "offline" in rows:
        off = {(r["group"], r["topic"], r["partition"]): r["audit"] for r in rows["offline"]}
        cross = [
            {
                "group": r["group"],
                "topic": r["topic"],
                "partition": r["partition"],
                "live": r["audit"],
                "offline": off.get((r["group"], r["topic"], r["partition"])),
            }
            for r in rows["live"]
            if r["audit"] != off.get((r["group"], r["topic"], r["partition"]))
        ]
    started = next((st for st in sc.steps if st.get("step") == "started"), {})
    # [group, topic, partition, cause, cause_leader_epoch, cause_leader] (cause None: no LOG_TRUNCATION) per source
    causes = {
        s: [[*k, *(v or (None, None, None))] for k, v in differential.truncation_causes(sc.verdicts, o).items()]
        for s, o in outs.items()
    }
    return {
        "seed": seed,
        "version": version,
        "episodes": sc.episodes,
        "rows": rows,
        "live_vs_offline": cross,
        "causes": causes,
        "unclean_leader": started.get("F"),
        "audits": audits,
        "outs": outs,
        "steps": sc.steps,
        # the live read of __consumer_offsets against Kafka's consumer reading it (differential.reader_agreement)
        "reader": reader,
        "share_rows": {s: share_episode.compare_share(share_oracle, o) for s, o in outs.items()}
        if share_oracle
        else {},
        "streams_rows": {s: streams_rows(rows[s], o) for s, o in outs.items()} if with_streams else {},
    }


def streams_rows(rows: list[dict], out: Path) -> list[dict]:
    """The differential rows of the streams-group episode's groups, each with the audit's ``group_type`` for it
    (``committed_offsets``) and ``agree`` also requiring it to be ``streams``."""
    committed, _findings = differential.read_output(out)
    res = []
    for r in rows:
        if ".streams_unclean." not in r["group"]:
            continue
        c = committed.get((r["group"], r["topic"], r["partition"])) or {}
        gt = c.get("group_type")
        res.append({**r, "group_type": gt, "agree": r["agree"] and gt == "streams"})
    return res


def streams_table(results: list[dict]) -> str:
    """Streams groups (KIP-1071): per version and audit, the streams group-partitions Kafka's consumer judged and
    the audit's agreement (verdict and ``group_type = streams``); empty when no scenario ran the streams episode."""
    lines = [
        "Streams groups (KIP-1071): a Kafka Streams application's commits judged by Kafka's consumer, and the audit's "
        "`group_type` for them:\n",
        "| Kafka | audit | scenarios | streams group-partitions | LogTruncationException | OK | agreements | "
        "disagreements (seeds) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for version, source, rs, rows, bad in _per_source(results, "streams_rows"):
        kinds = Counter(x["oracle"] for x in rows)
        agree = sum(1 for x in rows if x["agree"])
        lines.append(
            f"| {version} | {source} | {len(rs)} | {len(rows)} | {kinds['LogTruncationException']} | {kinds['OK']} | "
            f"{agree} ({100.0 * agree / max(1, len(rows)):.1f}%) | {len(rows) - agree} {bad or ''} |"
        )
    return "\n".join(lines) if len(lines) > 3 else ""


def _seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def table(results: list[dict]) -> str:
    lines = [
        "| Kafka | audit | scenarios | group-partitions judged | OK | LogTruncationException "
        "(of which after an unclean election) | OffsetOutOfRange | NoOffset | NO_VERDICT | agreements | "
        "documented differences | disagreements (seeds) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for version in sorted({r["version"] for r in results}, reverse=True):
        for source in SOURCES:
            rs = [r for r in results if r["version"] == version and source in r["rows"]]
            if not rs:
                continue
            rows = [x for r in rs for x in r["rows"][source]]
            kinds = Counter(x["oracle"] for x in rows)
            bad_seeds = sorted({r["seed"] for r in rs if not all(x["agree"] for x in r["rows"][source])})
            documented = sum(1 for x in rows if x.get("documented"))
            agree = sum(1 for x in rows if x["agree"] and not x.get("documented"))
            unclean = sum(1 for x in rows if x["oracle"] == "LogTruncationException" and ".unclean." in x["group"])
            lines.append(
                f"| {version} | {source} | {len(rs)} | {len(rows)} | {kinds['OK']} | {kinds['LogTruncationException']} ({unclean}) | "
                f"{kinds['OffsetOutOfRangeException']} | {kinds['NoOffsetForPartitionException']} | {kinds['NO_VERDICT']} | "
                f"{agree} ({100.0 * agree / max(1, len(rows)):.1f}%) | {documented} | {len(rows) - agree - documented} "
                f"{bad_seeds or ''} |"
            )
    return "\n".join(lines)


def _per_source(results: list[dict], key: str):
    """``(version, audit source, results, rows, seeds with a disagreement)`` for every version and source with rows
    under ``key`` (``share_rows`` or ``streams_rows``), newest version first."""
    for version in sorted({r["version"] for r in results if r.get(key)}, reverse=True):
        for source in SOURCES:
            rs = [r for r in results if r["version"] == version and source in (r.get(key) or {})]
            rows = [x for r in rs for x in r[key][source]]
            if rows:
                yield (
                    version,
                    source,
                    rs,
                    rows,
                    sorted({r["seed"] for r in rs if not all(x["agree"] for x in r[key][source])}),
                )


def share_table(results: list[dict]) -> str:
    """Share groups (KIP-932): per version and audit, the share group-partitions judged against Kafka's share
    consumer (the records it never delivered), empty when no scenario ran the share episodes."""
    lines = []
    for version, source, rs, rows, bad in _per_source(results, "share_rows"):
        skipped = [x for x in rows if x["expected"]]
        lines.append(
            f"| {version} | {source} | {len(rs)} | {len(rows)} | {len(skipped)} "
            f"({sum(x['expected'] for x in skipped)} records) | {sum(1 for x in rows if x['agree'])} | "
            f"{len(rows) - sum(1 for x in rows if x['agree'])} {bad or ''} |"
        )
    if not lines:
        return ""
    return "\n".join(
        [
            "Share groups (KIP-932): the audit against Kafka's `KafkaShareConsumer` (records never delivered):\n",
            "| Kafka | audit | scenarios | share group-partitions | with records never delivered | agreements | "
            "disagreements (seeds) |",
            "|---|---|---|---|---|---|---|",
            *lines,
        ]
    )


def cause_summary(results: list[dict]) -> str:
    """One line per version and offline source: how many truncations of unclean episodes the audit attributes to
    ``unclean_election`` naming the broker the scenario elected uncleanly, and of stale-epoch episodes to
    ``stale_client_epoch``."""
    lines = []
    for version in dict.fromkeys(r["version"] for r in results):
        for src in ("offline", "hot"):
            rows = [
                (c, r.get("unclean_leader"))
                for r in results
                if r["version"] == version
                for c in (r.get("causes") or {}).get(src, [])
            ]
            unclean = [(c, f) for c, f in rows if ".unclean." in c[0]]
            right = sum(1 for c, f in unclean if c[3] == "unclean_election" and c[5] == f)
            stale = [c for c, _f in rows if ".stale_epoch." in c[0]]
            lines.append(
                f"- Kafka {version}, {src}: `cause` of the unclean episodes' truncations is `unclean_election` "
                f"naming the uncleanly elected broker for {right} of {len(unclean)}; stale-epoch episodes' "
                f"`stale_client_epoch` for {sum(1 for c in stale if c[3] == 'stale_client_epoch')} of {len(stale)}"
            )
    return "\n".join(lines)


def merge(json_paths: list[str], out: Path) -> str:
    """Combine soak JSON files (e.g. one per version, run in parallel) into one table at ``out``.md/.json."""
    results, runs = [], []
    for jp in json_paths:
        for r in json.loads(Path(jp).read_text()):
            runs.append(r)
            if r.get("error"):
                continue
            rows = {
                s: [
                    dict(
                        zip(
                            (
                                "group",
                                "topic",
                                "partition",
                                "oracle",
                                "divergent_offset",
                                "audit",
                                "agree",
                                "documented",
                            ),
                            x,
                        )
                    )
                    for x in xs
                ]
                for s, xs in r["rows"].items()
            }
            results.append(
                {
                    "seed": r["seed"],
                    "version": r["version"],
                    "rows": rows,
                    "live_vs_offline": r.get("live_vs_offline") or [],
                    "share_rows": r.get("share_rows") or {},
                    "streams_rows": r.get("streams_rows") or {},
                }
            )
    failed = [(r["version"], r["seed"], r["error"]) for r in runs if r.get("error")]
    md = (
        table(results)
        + "\n"
        + (f"\n{share_table(results)}\n" if share_table(results) else "")
        + (f"\n{streams_table(results)}\n" if streams_table(results) else "")
        + (f"\nScenarios that could not run: {failed}\n" if failed else "")
        + "".join(
            f"\nlive vs offline, Kafka {r['version']} seed {r['seed']}: {r['live_vs_offline']}\n"
            for r in results
            if r["live_vs_offline"]
        )
    )
    (out.parent / (out.name + ".json")).write_text(json.dumps(runs, indent=1, default=str))
    return md


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.lab.soak", description=__doc__.split("\n")[0])
    ap.add_argument("--versions", default=",".join(kafka_dist.versions()))
    ap.add_argument("--seeds", default="1-20", help="e.g. 1-20 or 3,7,11")
    ap.add_argument("--out", default="bench/lab_soak", help="writes OUT.md and OUT.json")
    ap.add_argument(
        "--workdir",
        default=None,
        help="where scenarios run (default: a temp dir, removed after each agreeing seed; disagreeing seeds are kept)",
    )
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--no-share", action="store_true", help="leave out the share-group episodes (run on Kafka 4.x by default)"
    )
    ap.add_argument(
        "--no-streams",
        action="store_true",
        help="leave out the streams-group episode (run on Kafka 4.1+ by default)",
    )
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="only combine earlier soaks' JSON files into OUT")
    args = ap.parse_args(argv)
    if args.merge:
        print(merge(args.merge, Path(args.out)))
        return 0
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("KOA_SHUFFLE_PARTITIONS", "2")
    from audit.spark import build_session

    spark = build_session(args.master)
    base = Path(args.workdir or tempfile.mkdtemp(prefix="koa-soak-"))
    results, started = [], time.time()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out.parent / (out.name + ".md"), out.parent / (out.name + ".json")
    for version in [v.strip() for v in args.versions.split(",") if v.strip()]:
        for seed in _seeds(args.seeds):
            wd = base / f"{version}-seed{seed}"
            t = time.time()
            try:
                res = check_seed(seed, version, wd, spark, share=not args.no_share, streams=not args.no_streams)
            except Exception as exc:  # a scenario that could not run is reported, not hidden
                print(f"Kafka {version} seed {seed}: scenario failed: {exc!r} (kept in {wd})", flush=True)
                results.append({"seed": seed, "version": version, "error": repr(exc), "rows": {}})
                continue
            results.append(res)
            bad = {s: [x for x in rows if not x["agree"]] for s, rows in res["rows"].items()}
            share_bad = {s: [x for x in rows if not x["agree"]] for s, rows in res["share_rows"].items()}
            for s, xs in share_bad.items():
                if xs:
                    print(f"Kafka {version} seed {seed}: {s} share groups disagree: {xs}", flush=True)
            streams_bad = {s: [x for x in rows if not x["agree"]] for s, rows in res["streams_rows"].items()}
            for s, xs in streams_bad.items():
                if xs:
                    print(f"Kafka {version} seed {seed}: {s} streams groups disagree: {xs}", flush=True)
            n = len(next(iter(res["rows"].values())))
            print(
                f"Kafka {version} seed {seed}: {n} group-partitions, "
                + ", ".join(f"{s} {len(rows) - len(bad[s])}/{len(rows)}" for s, rows in res["rows"].items())
                + f", live≠offline {len(res['live_vs_offline'])}, {time.time() - t:.0f} s",
                flush=True,
            )
            for s, rows in res["rows"].items():
                if bad[s]:
                    print(differential.describe_disagreements(rows, seed, version, s), flush=True)
            for s, a in res["audits"].items():
                if not _audit_ok(a):
                    print(
                        f"Kafka {version} seed {seed}: {s} audit with reports: exit {a['exit_code']}, "
                        f"report.html {a['report_html']}, validation_result.json {a['validation_result']}"
                        + (f"\n{a['error']}" if a["error"] else ""),
                        flush=True,
                    )
            if (
                not any(bad.values())
                and not any(share_bad.values())
                and not any(streams_bad.values())
                and not res["live_vs_offline"]
                and all(map(_audit_ok, res["audits"].values()))
                and not args.workdir
            ):
                shutil.rmtree(wd, ignore_errors=True)
            ok_results = [r for r in results if "error" not in r]
            failed = [(r["version"], r["seed"], r["error"]) for r in results if "error" in r]
            md_path.write_text(
                f"# Kafka lab soak: the audit against Kafka's own consumer\n\n"
                f"`python -m tests.lab.soak --versions {args.versions} --seeds {args.seeds}`, "
                f"{time.strftime('%Y-%m-%d')}, {time.time() - started:.0f} s.\n\n"
                + table(ok_results)
                + "\n\n"
                + cause_summary(ok_results)
                + "\n\n"
                + (share_table(ok_results) + "\n\n" if share_table(ok_results) else "")
                + (streams_table(ok_results) + "\n\n" if streams_table(ok_results) else "")
                + (f"Scenarios that could not run: {failed}\n" if failed else "")
                + "".join(
                    f"\nlive vs offline, Kafka {r['version']} seed {r['seed']}: {r['live_vs_offline']}\n"
                    for r in ok_results
                    if r["live_vs_offline"]
                )
            )
            json_path.write_text(
                json.dumps(
                    [
                        {
                            "version": r["version"],
                            "seed": r["seed"],
                            "error": r.get("error"),
                            "episodes": r.get("episodes"),
                            "judged": {s: len(rows) for s, rows in r["rows"].items()},
                            "rows": {
                                s: [
                                    [
                                        x["group"],
                                        x["topic"],
                                        x["partition"],
                                        x["oracle"],
                                        x["divergent_offset"],
                                        x["audit"],
                                        x["agree"],
                                        x.get("documented"),
                                    ]
                                    for x in rows
                                ]
                                for s, rows in r["rows"].items()
                            },
                            "causes": r.get("causes"),
                            "unclean_leader": r.get("unclean_leader"),
                            "disagreements": {s: [x for x in rows if not x["agree"]] for s, rows in r["rows"].items()},
                            "live_vs_offline": r.get("live_vs_offline"),
                            "share_rows": r.get("share_rows") or {},
                            "streams_rows": r.get("streams_rows") or {},
                            "audits": {
                                s: {k: v for k, v in a.items() if k != "out"}
                                for s, a in (r.get("audits") or {}).items()
                            },
                        }
                        for r in results
                    ],
                    indent=1,
                    default=str,
                )
            )
    spark.stop()
    print(md_path.read_text())
    bad = any(
        "error" in r
        or r["live_vs_offline"]
        or any(not x["agree"] for rows in r["rows"].values() for x in rows)
        or any(not x["agree"] for key in ("share_rows", "streams_rows") for rows in r[key].values() for x in rows)
        or not all(map(_audit_ok, r["audits"].values()))
        for r in results
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
