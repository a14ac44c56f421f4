"""Fault-injection table: damage a copy of the shared scenario one way at a time, audit it, compare with a clean run.

    python -m bench.faults [--out bench/faults] [--faults NAME[,NAME...]] [--master local[2]]

Each fault in :data:`FAULTS` edits a fresh copy of ``../shared/data/scenarios/unclean-election-3brokers/brokers``
(the shared data itself is never touched), then the real CLI (``kafka-offset-audit audit ... --fail-on never
--skip-reports --quiet``, in this process, on one SparkSession) audits it.  Per fault the table gives the exit
status, what ``summary.json`` reported (reason, file, byte position), and how many group-partitions' findings or
committed offsets differ from the clean run: among those the fault touched (its partitions, or the groups whose
``__consumer_offsets`` partition it touched), and among the rest, which must be 0.
``tests/pipeline/test_fault_injection.py`` runs the same catalogue and asserts every expectation.  Writes ``OUT.md``
and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KOA_SHARED_DIR", REPO.parent / "shared"))
SCENARIO_BROKERS = SHARED / "data/scenarios/unclean-election-3brokers/brokers"
OFFSETS = "__consumer_offsets"
ALL = "all"
#: Columns that name which replica answered (they may change when a damaged replica is passed over).
REPLICA_COLUMNS = ("answered_by_broker", "authority", "detail")


@dataclass
class Damage:
    """What a fault did: the partitions it touched and what the audit must report.

    ``touched``: ``{(topic, partition)}`` (``__consumer_offsets`` partitions stand for the groups stored there),
    or :data:`ALL`.  ``expect``: ``(reason, file suffix, byte position or None)`` that must be in
    ``summary.json``'s ``records_skipped.where``; ``notes``: substrings that must be in its ``inputs.notes``.
    ``log_dirs``: the ``--log-dirs`` to pass (default: the damaged copy); ``exit``: the expected exit status.
    ``output_setup``: prepares the output location before the run (a half-written earlier output ...);
    ``stderr``: text the error message must hold; ``no_leftovers``: no staging dir may remain beside the output.
    """

    touched: set | str = field(default_factory=set)
    expect: list[tuple[str, str, int | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log_dirs: list[Path] | None = None
    exit: int = 0
    output_setup: Callable[[Path], None] | None = None
    stderr: str | None = None
    no_leftovers: bool = False  # the run must remove the staging dirs of killed runs beside the output
    recovered: bool = False  # what was skipped must come back from another replica: nothing changes at all


@dataclass
class Fault:
    name: str
    what: str
    apply: Callable[[Path], Damage]
    killed_run: bool = False  # run the CLI once in a subprocess and SIGKILL it while it writes, then rerun


# ------------------------------------------------------------------------------------------------ helpers


def java_hash_partition(group: str, partitions: int) -> int:
    """``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode) % partitions``
    (``GroupCoordinator.partitionFor``), with Java's UTF-16 ``String.hashCode``."""
    h = 0
    for unit in struct.unpack(f">{len(group.encode('utf-16-be')) // 2}H", group.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h) % partitions


def _segment(d: Path) -> Path:
    return sorted(p for p in d.glob("*.log") if p.stat().st_size)[-1]


def _batches(seg: Path):
    from audit.formats.record_batch import scan_batches

    return scan_batches(seg.read_bytes())


def _busiest_offsets_partition(root: Path, broker: str = "broker-1") -> Path:
    """The ``__consumer_offsets`` partition dir of ``broker`` with the most batches (the most groups' commits)."""
    dirs = [d for d in (root / broker).glob(f"{OFFSETS}-*") if any(p.stat().st_size for p in d.glob("*.log"))]
    return max(dirs, key=lambda d: (len(_batches(_segment(d)).position), d.name))


def _tp(d: Path) -> tuple[str, int]:
    topic, _, part = d.name.rpartition("-")
    return topic, int(part)


def _rel(root: Path, p: Path) -> str:
    return str(p.relative_to(root.parent))


def _recrc(buf: bytearray, pos: int) -> None:
    from crc32c import crc32c

    length = struct.unpack_from(">i", buf, pos + 8)[0]
    buf[pos + 17 : pos + 21] = struct.pack(">I", crc32c(bytes(buf[pos + 21 : pos + 12 + length])))


# ------------------------------------------------------------------------------------------------ the faults


def _cut_last_batch(root: Path, d: Path) -> Damage:
    """Cut the partition dir's newest segment 30 bytes into its last batch (a copy or a disk that stopped there)."""
    seg = _segment(d)
    last = int(_batches(seg).position[-1])
    with open(seg, "r+b") as fh:
        fh.truncate(last + 30)
    return Damage(
        {_tp(d)}, [("partial_batch", _rel(root, seg), last), ("log_end_below_high_watermark", _rel(root, seg), None)]
    )


def truncated_offsets_segment(root: Path) -> Damage:
    return _cut_last_batch(root, _busiest_offsets_partition(root))


def truncated_user_segment(root: Path) -> Damage:
    return _cut_last_batch(root, root / "broker-1/dev.payments-0")


def flipped_header_byte(root: Path) -> Damage:
    d = _busiest_offsets_partition(root)
    seg = _segment(d)
    pos = int(_batches(seg).position[1])
    buf = bytearray(seg.read_bytes())
    buf[pos + 45] ^= 0xFF  # producer id, inside the CRC-covered header
    seg.write_bytes(bytes(buf))
    return Damage({_tp(d)}, [("crc_mismatch", _rel(root, seg), pos)], recovered=True)


def flipped_record_byte_crc_recomputed(root: Path) -> Damage:
    from audit.formats.record_batch import extract_records, scan_batches

    d = _busiest_offsets_partition(root)
    seg = _segment(d)
    buf = bytearray(seg.read_bytes())
    scan = scan_batches(bytes(buf))
    recs = extract_records(bytes(buf), scan)
    i = 0  # the segment's first record: make its key's schema version 0x7fff, then fix the batch CRC
    ks, b = int(recs.key_start[i]), int(recs.batch[i])
    buf[ks : ks + 2] = b"\x7f\xff"
    _recrc(buf, int(scan.position[b]))
    seg.write_bytes(bytes(buf))
    return Damage({_tp(d)}, [("unknown_record_type", _rel(root, seg), int(scan.position[b]))], recovered=True)


def empty_offsets_log(root: Path) -> Damage:
    d = _busiest_offsets_partition(root)
    seg = _segment(d)
    seg.write_bytes(b"")
    return Damage({_tp(d)}, [("log_end_below_high_watermark", _rel(root, d), None)])


def random_offsets_log(root: Path) -> Damage:
    d = _busiest_offsets_partition(root)
    seg = _segment(d)
    seg.write_bytes(random.Random(7).randbytes(seg.stat().st_size))
    return Damage({_tp(d)}, [(None, _rel(root, seg), 0)])


def deleted_epoch_checkpoint(root: Path) -> Damage:
    d = root / "broker-1/dev.payments-0"
    (d / "leader-epoch-checkpoint").unlink()
    return Damage({_tp(d)}, [("leader_epoch_cache_missing", _rel(root, d / "leader-epoch-checkpoint"), None)])


def garbled_epoch_checkpoint(root: Path) -> Damage:
    d = root / "broker-1/dev.inventory-2"
    (d / "leader-epoch-checkpoint").write_bytes(random.Random(3).randbytes(40))
    f = _rel(root, d / "leader-epoch-checkpoint")
    return Damage({_tp(d)}, [("bad_checkpoint_header", f, 0), ("leader_epoch_cache_unreadable", f, None)])


def missing_meta_properties(root: Path) -> Damage:
    (root / "broker-2/meta.properties").unlink()
    return Damage(ALL, notes=["no node.id/broker.id in meta.properties"])


def symlink_loop(root: Path) -> Damage:
    os.symlink("..", root / "broker-1/dev.payments-0/loop")
    os.symlink("loop-b", root / "broker-1/loop-a")
    os.symlink("loop-a", root / "broker-1/loop-b")
    return Damage(set())


def zero_byte_index(root: Path) -> Damage:
    d = root / "broker-1/dev.payments-0"
    for idx in d.glob("*.index"):
        idx.write_bytes(b"")
    return Damage(set())


def truncated_metadata_log(root: Path) -> Damage:
    d = root / "controller-100/__cluster_metadata-0"
    seg = _segment(d)
    pos = int(_batches(seg).position[-3])
    with open(seg, "r+b") as fh:
        fh.truncate(pos + 20)
    return Damage(set(), [("partial_batch", _rel(root, seg), pos)])


def broker_missing(root: Path) -> Damage:
    gone = root / "broker-3"
    touched = {_tp(d) for d in gone.iterdir() if d.is_dir() and "-" in d.name}
    shutil.rmtree(gone)
    return Damage(touched)


def broker_twice(root: Path) -> Damage:
    twin = root.parent / "broker-1-copy"
    shutil.copytree(root / "broker-1", twin)
    return Damage(
        set(),
        notes=["overlaps another --log-dirs root", "more than one log dir"],
        log_dirs=[root, root / "broker-1", twin],
    )


def half_written_output(root: Path) -> Damage:
    def setup(out: Path) -> None:
        # what a run killed mid-write leaves: its staging dir (named for its host and a process now gone)
        from audit.io.outputs import HOST

        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        staging = out.parent / f"{out.name}.staging-{HOST}-{dead.pid}-0123456789ab"
        (staging / "findings").mkdir(parents=True)
        (staging / "findings/part-00000.parquet").write_bytes(b"PAR1 cut short")

    return Damage(set(), output_setup=setup, no_leftovers=True)


def foreign_output(root: Path) -> Damage:
    def setup(out: Path) -> None:
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("not an audit output")

    return Damage(set(), exit=2, output_setup=setup, stderr="not a kafka-offset-audit output")


def missing_log_dir(root: Path) -> Damage:
    return Damage(set(), exit=2, log_dirs=[root, root.parent / "no-such-broker"], stderr="no-such-broker")


def killed_mid_write(root: Path) -> Damage:
    return Damage(set(), no_leftovers=True)


FAULTS: list[Fault] = [
    Fault(
        "truncated-offsets-segment",
        "`__consumer_offsets` segment of the leader cut mid-batch",
        truncated_offsets_segment,
    ),
    Fault("truncated-user-segment", "user partition segment of the leader cut mid-batch", truncated_user_segment),
    Fault("flipped-header-byte", "a byte of a batch header flipped (CRC-32C no longer matches)", flipped_header_byte),
    Fault(
        "flipped-record-byte",
        "a record's key version set to 0x7fff, batch CRC recomputed",
        flipped_record_byte_crc_recomputed,
    ),
    Fault("empty-log", "`__consumer_offsets` segment of the leader emptied (0 bytes)", empty_offsets_log),
    Fault("random-log", "`__consumer_offsets` segment replaced by random bytes", random_offsets_log),
    Fault("deleted-epoch-checkpoint", "leader's `leader-epoch-checkpoint` deleted", deleted_epoch_checkpoint),
    Fault(
        "garbled-epoch-checkpoint",
        "leader's `leader-epoch-checkpoint` replaced by random bytes",
        garbled_epoch_checkpoint,
    ),
    Fault("missing-meta-properties", "a broker's `meta.properties` deleted", missing_meta_properties),
    Fault("symlink-loop", "symlink loops inside a log dir", symlink_loop),
    Fault("zero-byte-index", "a segment's `.index` emptied", zero_byte_index),
    Fault("truncated-metadata-log", "controller's `__cluster_metadata` segment cut mid-batch", truncated_metadata_log),
    Fault("broker-missing", "a whole broker's log dir missing", broker_missing),
    Fault("broker-twice", "the same broker given twice (same path inside a parent, and a copy)", broker_twice),
    Fault("half-written-output", "a killed run's staging dir left beside the output", half_written_output),
    Fault("foreign-output", "`--output` is a directory that is not an audit output", foreign_output),
    Fault("missing-log-dir", "one `--log-dirs` path does not exist", missing_log_dir),
    Fault(
        "killed-mid-write", "a run SIGKILLed while writing its output, then rerun", killed_mid_write, killed_run=True
    ),
]


# ------------------------------------------------------------------------------------------------ running


def copy_scenario(dst: Path) -> Path:
    """A writable copy of the shared scenario's ``brokers/`` at ``dst``."""
    shutil.copytree(SCENARIO_BROKERS, dst, symlinks=True)
    for p in dst.rglob("*"):
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def cli_audit(log_dirs: list[Path], out: Path) -> tuple[int, str]:
    """The real CLI in this process (it reuses the active SparkSession): (exit status, stderr)."""
    from audit.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(
            [
                "audit",
                "--log-dirs",
                *map(str, log_dirs),
                "--output",
                str(out),
                "--fail-on",
                "never",
                "--skip-reports",
                "--quiet",
            ]
        )
    return code, err.getvalue()


def _kill_while_writing(log_dirs: list[Path], out: Path, timeout: float = 600) -> bool:
    """Run the CLI in a subprocess and SIGKILL its process group once its staging output appears."""
    cmd = [
        sys.executable,
        "-m",
        "audit.cli",
        "audit",
        "--log-dirs",
        *map(str, log_dirs),
        "--output",
        str(out),
        "--fail-on",
        "never",
        "--skip-reports",
        "--quiet",
        "--master",
        "local[1]",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, killed = time.time() + timeout, False
    try:
        while time.time() < deadline and proc.poll() is None:
            if any(out.parent.glob(f"{out.name}.staging-*/*")):
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return killed


def tables(out: Path) -> dict[str, dict]:
    """``{table: {(group_id, topic, partition): sorted rows}}`` of findings and committed_offsets, without the
    columns naming which replica answered."""
    import pyarrow.parquet as pq

    res = {}
    for t in ("findings", "committed_offsets"):
        tab = pq.read_table(out / t)
        tab = tab.drop_columns([c for c in REPLICA_COLUMNS if c in tab.column_names])
        rows: dict = {}
        for r in tab.to_pylist():
            rows.setdefault((r["group_id"], r["topic"], r["partition"]), []).append(tuple(sorted(r.items())))
        res[t] = {k: sorted(v, key=repr) for k, v in rows.items()}
    return res


def changed_keys(a: dict, b: dict) -> set:
    keys = set()
    for t in a:
        for k in set(a[t]) | set(b[t]):
            if a[t].get(k) != b[t].get(k):
                keys.add(k)
    return keys


def run_fault(fault: Fault, work: Path, clean: dict, offsets_partitions: int) -> dict:
    """Damage a copy as ``fault`` says, audit it, and compare with ``clean`` (:func:`tables` of a clean run).

    Returns the table row: name, what, exit, expected exit, reported (list of reason/file/position), missing
    expectations, changed_touched, changed_untouched, stderr (first line), ok.
    """
    work.mkdir(parents=True, exist_ok=True)
    root = copy_scenario(work / "brokers")
    dmg = fault.apply(root)
    out = work / "out"
    if dmg.output_setup:
        dmg.output_setup(out)
    dirs = dmg.log_dirs or [root]
    killed = _kill_while_writing(dirs, out) if fault.killed_run else None
    t0 = time.time()
    code, err = cli_audit(dirs, out)

    def rel(text: str) -> str:  # paths in messages relative to the fault's work dir
        return text.replace("file:", "").replace(str(work) + "/", "")

    row = {
        "fault": fault.name,
        "what": fault.what,
        "exit": code,
        "expected_exit": dmg.exit,
        "seconds": round(time.time() - t0, 1),
        "stderr": rel(err.strip().splitlines()[-1]) if err.strip() else "",
        "reported": [],
        "missing": [],
        "changed_touched": None,
        "changed_untouched": None,
    }
    if killed is not None:
        row["killed_while_writing"] = killed
    problems = []
    if code != dmg.exit:
        problems.append(f"exit {code}, expected {dmg.exit}")
    if dmg.stderr and dmg.stderr not in err:
        problems.append(f"stderr lacks {dmg.stderr!r}")
    if code == 0:
        summary = json.loads((out / "summary.json").read_text())
        base = str(root.parent)
        where = [
            {
                "reason": w["reason"],
                "file": (w["file"] or "").replace("file:", "").replace(base + "/", ""),
                "position": w["position"],
            }
            for w in summary["records_skipped"]["where"]
        ]
        row["reported"] = where
        for reason, suffix, pos in dmg.expect:
            if not any(
                (reason is None or w["reason"] == reason)
                and w["file"].endswith(suffix)
                and (pos is None or w["position"] == pos)
                for w in where
            ):
                row["missing"].append([reason, suffix, pos])
        notes = " ".join(summary["inputs"].get("notes", []))
        row["notes"] = [rel(n) for n in summary["inputs"].get("notes", [])]
        row["missing"] += [["note", n, None] for n in dmg.notes if n not in notes]
        if row["missing"]:
            problems.append(f"not reported: {row['missing']}")
        got = tables(out)
        diff = changed_keys(clean, got)

        def touched(k):
            return (
                dmg.touched == ALL
                or (k[1], k[2]) in dmg.touched
                or (OFFSETS, java_hash_partition(k[0], offsets_partitions)) in dmg.touched
            )

        row["changed_touched"] = sum(1 for k in diff if touched(k))
        row["changed_untouched"] = sorted(list(k) for k in diff if not touched(k))
        if row["changed_untouched"]:
            problems.append(f"untouched group-partitions changed: {row['changed_untouched']}")
        row["records_recovered"] = summary.get("records_recovered", {}).get("total", 0)
        if dmg.recovered and (row["changed_touched"] or not row["records_recovered"]):
            problems.append(
                f"expected recovery from another replica: {row['records_recovered']} records recovered, "
                f"{row['changed_touched']} touched group-partitions changed"
            )
        row["staging_left"] = sorted(p.name for p in out.parent.glob(f"{out.name}.staging-*"))
        row["staging_removed"] = summary.get("output_leftovers", {}).get("removed", [])
        if dmg.no_leftovers and (row["staging_left"] or not row["staging_removed"]):
            problems.append(
                f"staging dirs of killed runs: left {row['staging_left']}, removed {row['staging_removed']}"
            )
    row["problems"] = problems
    row["ok"] = not problems
    return row


def clean_run(work: Path) -> tuple[dict, int]:
    """Audit an undamaged copy: (its :func:`tables`, the number of ``__consumer_offsets`` partitions)."""
    root = copy_scenario(work / "brokers")
    code, err = cli_audit([root], work / "out")
    if code != 0:
        raise RuntimeError(f"the clean audit failed (exit {code}): {err}")
    n = len({d.name for d in root.glob(f"*/{OFFSETS}-*")})
    return tables(work / "out"), n


def markdown(rows: list[dict]) -> str:
    lines = [
        "| fault | exit | reported in summary.json (reason @ file:byte) | group-partitions changed: touched / untouched | ok |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        rep = "; ".join(
            f"`{w['reason']}` @ {w['file']}:{w['position'] if w['position'] is not None else '-'}"
            for w in r["reported"][:3]
        ) or ("—" if r["exit"] == 0 else f"stderr: {r['stderr']}")
        if r.get("notes"):
            rep += "; notes: " + "; ".join(n[:110] for n in r["notes"][:2])
        if r.get("records_recovered"):
            rep += f"; {r['records_recovered']} record(s) recovered from another replica"
        if r.get("staging_removed"):
            rep += f"; removed the killed run's {', '.join(r['staging_removed'])}"
        if r.get("staging_left"):
            rep += f"; left {', '.join(r['staging_left'])}"
        changed = "—" if r["changed_touched"] is None else f"{r['changed_touched']} / {len(r['changed_untouched'])}"
        lines.append(
            f"| **{r['fault']}**: {r['what']} | {r['exit']} | {rep} | {changed} | {'yes' if r['ok'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/faults", help="writes OUT.md and OUT.json")
    ap.add_argument("--faults", default=None, help="comma-separated fault names (default: all)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    import tempfile

    from audit.spark import build_session

    chosen = [f for f in FAULTS if not args.faults or f.name in args.faults.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="koa-faults-"))
    spark = build_session(args.master)
    try:
        clean, n = clean_run(work / "clean")
        rows = []
        for f in chosen:
            rows.append(run_fault(f, work / f.name, clean, n))
            print(f"{f.name}: exit {rows[-1]['exit']}, ok={rows[-1]['ok']} {rows[-1]['problems'] or ''}", flush=True)
    finally:
        spark.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    md = markdown(rows)
    Path(args.out + ".md").write_text(
        "# Fault-injection table\n\nProduced by `python -m bench.faults` on a copy of the shared scenario "
        "(exit statuses with `--fail-on never`).\n\n" + md
    )
    Path(args.out + ".json").write_text(json.dumps(rows, indent=1, default=str))
    print(md)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
