"""Coverage-guided fuzzing of every byte-level decoder, with atheris (libFuzzer for Python).

Usage::

    python -m bench.fuzz --seconds N [--runs R] [--harness NAME ...] [--out bench/fuzz] [--jobs J] [--fresh]
    python -m bench.fuzz --write-seeds [--harness NAME ...]  # refresh tests/data/fuzz-seeds/ from the real samples
    python -m bench.fuzz --list                 # the harnesses

Each harness of :mod:`bench.fuzz_harnesses` runs in its own subprocess (libFuzzer ends the process on a
finding) for ``--seconds`` of fuzzing; after a finding the harness is started again on its corpus until
its time is used up (or, with ``--runs``, until it has run that many inputs), so one run counts every finding.  libFuzzer options: a per-input timeout of 2 s (a
*hang*), ``-malloc_limit_mb=256`` and ``-rss_limit_mb`` = the process's RSS after start-up + 256 MiB
(+128 MiB of slack for the corpus and allocator retention), ``-max_len`` = 1 MiB.  A *memory blow-up* is
an input whose peak RSS passes the RSS just before it by more than 256 MiB: the harness process checks
that after every input (libFuzzer's RSS check runs once a second on the whole process, and misses a
short spike), libFuzzer's RSS limit is the backstop for a blow-up inside C code.  Only the project's
``audit`` package is instrumented for coverage (edges; comparison tracing is off, see :func:`child`).

Work directories (corpora, findings, logs) live under ``.fuzz-work/`` (git-ignored).  The figures are
printed and written to ``OUT.md`` and ``OUT.json``: per harness the inputs tried, inputs/s, libFuzzer's
coverage figures (``cov``: instrumented edges, ``ft``: features), crashes, hangs, memory blow-ups and
peak RSS, plus a total row.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".fuzz-work"
TIMEOUT_S = 2
BLOWUP_MB = 256
MAX_LEN = 1 << 20
_BLOWUP_MARK = "KOA_MEMORY_BLOWUP"


# =========================================================================== child: one libFuzzer process


class MemoryBlowup(Exception):
    """An input made the harness process's peak RSS pass the RSS just before it by more than 256 MiB."""


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(name: str, work: Path, seconds: int, extra: list[str]) -> None:
    """Fuzz harness ``name`` in this process until libFuzzer stops (time up or a finding)."""
    import atheris
    from atheris.import_hook import HookManager

    # comparison (dataflow) tracing off by default: atheris's _trace_cmp leaks about 9 KiB an input on the
    # numpy comparisons of the offsets decoders (RSS +230 MiB in 25,000 inputs, none without it), which
    # would end every long run in a false memory blow-up; KOA_FUZZ_DATAFLOW=1 turns it on
    dataflow = os.environ.get("KOA_FUZZ_DATAFLOW", "0") == "1"
    with HookManager({"audit"}, set(), True, trace_dataflow=dataflow):
        import audit.formats.checkpoints  # noqa: F401
        import audit.formats.latest  # noqa: F401
        import audit.formats.metadata_log  # noqa: F401
        import audit.formats.offsets  # noqa: F401
        import audit.formats.record_batch  # noqa: F401
        import audit.formats.remote_log_metadata  # noqa: F401
        import audit.formats.segments  # noqa: F401
        import audit.formats.share_state  # noqa: F401
        import audit.sources.logdirs  # noqa: F401
    from bench import fuzz_harnesses as fh

    h = fh.HARNESSES[name]
    corpus = work / "corpus"
    # warm up (lazy imports, codec libraries) so the baseline RSS is the harness's steady state
    for p in sorted(corpus.iterdir())[:20]:
        try:
            h.fn(p.read_bytes())
        except Exception:
            pass
    baseline = _rss_mb()
    limit_mb = int(baseline) + BLOWUP_MB
    statm = os.open("/proc/self/statm", os.O_RDONLY)
    status = os.open("/proc/self/status", os.O_RDONLY)
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    blowup_kb = BLOWUP_MB * 1024

    def hwm_kb() -> int:
        # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the parent across
        # vfork+exec, so a big parent would hide this process's own peak
        text = os.pread(status, 8192, 0)
        i = text.index(b"VmHWM:")
        return int(text[i + 6 : text.index(b"kB", i)])

    peak = [hwm_kb()]
    print(f"KOA_BASELINE_RSS_MB {baseline:.1f} limit {limit_mb}", flush=True)

    def test_one(data: bytes) -> None:
        # the input's own growth: its peak RSS (when it set a new peak) minus the RSS just before it, so
        # neither libFuzzer's corpus nor memory the allocator kept from earlier inputs counts
        before_kb = int(os.pread(statm, 64, 0).split()[1]) * page_kb
        h.fn(data)
        now = hwm_kb()
        if now > peak[0]:
            peak[0] = now
            if now - before_kb > blowup_kb:
                raise MemoryBlowup(
                    f"{_BLOWUP_MARK}: peak RSS {now // 1024} MiB, {(now - before_kb) // 1024} MiB "
                    f"above the {before_kb // 1024} MiB before this input of {len(data)} bytes"
                )

    mutate = None
    if h.mutate is not None:

        def mutate(data: bytes, max_size: int, seed: int) -> bytes:
            try:
                return h.mutate(data, max_size, seed, atheris.Mutate)[:max_size]
            except Exception:  # a mutator bug must not end the run: fall back to libFuzzer's mutation
                return atheris.Mutate(data, max_size)

    # libFuzzer's own RSS check (once a second, on the whole process) is the backstop for a blow-up
    # inside C code, where test_one never regains control: start-up + 256 MiB + 128 MiB of slack for
    # the corpus and allocator retention over a long run
    args = [
        sys.argv[0],
        str(corpus),
        f"-timeout={TIMEOUT_S}",
        f"-rss_limit_mb={limit_mb + 128}",
        f"-malloc_limit_mb={BLOWUP_MB}",
        f"-max_len={MAX_LEN}",
        f"-max_total_time={seconds}",
        f"-artifact_prefix={work / 'findings'}/",
        "-print_final_stats=1",
        "-reload=0",
        "-len_control=100",
        *extra,
    ]
    atheris.Setup(args, test_one, custom_mutator=mutate)
    atheris.Fuzz()


# =========================================================================== parent


@dataclass
class Finding:
    kind: str  # crash | hang | blowup
    artifact: str
    signature: str
    session: int


@dataclass
class Result:
    harness: str
    seconds: float = 0.0
    inputs: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    peak_rss_mb: int = 0
    baseline_rss_mb: float = 0.0
    sessions: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def crashes(self) -> int:
        return sum(f.kind == "crash" for f in self.findings)

    @property
    def hangs(self) -> int:
        return sum(f.kind == "hang" for f in self.findings)

    @property
    def blowups(self) -> int:
        return sum(f.kind == "blowup" for f in self.findings)

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0


_STATUS = re.compile(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+)(?: corp: (\d+)/\S+)?.*?(?:rss: (\d+)Mb)?$")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")


def seed_corpus(name: str, corpus: Path) -> int:
    """Fill ``corpus`` with the harness's seeds: built from the real samples, the committed seeds and
    the regression inputs.  Returns how many files were written."""
    from bench import fuzz_harnesses as fh

    corpus.mkdir(parents=True, exist_ok=True)
    items = list(fh.build_seeds(name))
    for root in (fh.SEED_DIR, fh.REGRESSION_DIR):
        items += [(p.name, p.read_bytes()) for p in fh.saved_inputs(root, name)]
    n = 0
    for _label, data in items:
        if len(data) > MAX_LEN:
            continue
        p = corpus / hashlib.sha1(data).hexdigest()
        if not p.exists():
            p.write_bytes(data)
            n += 1
    return n


def _signature(kind: str, text: str) -> str:
    """What identifies a finding: the exception and the innermost project frame, or the hang's stack."""
    if kind == "blowup":
        return "memory blow-up"
    if kind == "hang":
        frames = re.findall(r'File "([^"]*/(?:audit|kafka)/[^"]+)", line (\d+), in (\w+)', text)
        return "timeout" + (f" in {frames[-1][2]} ({Path(frames[-1][0]).name}:{frames[-1][1]})" if frames else "")
    exc = re.findall(r"^(\w+(?:\.\w+)*(?:Error|Exception|Violation|Warning)\w*): (.*)$", text, re.M)
    frames = re.findall(r'File "([^"]*/audit/[^"]+)", line (\d+), in (\w+)', text)
    where = f" at {Path(frames[-1][0]).name}:{frames[-1][1]} ({frames[-1][2]})" if frames else ""
    head = f"{exc[-1][0]}: {exc[-1][1][:120]}" if exc else "crash"
    return head + where


def run_harness(
    name: str,
    seconds: int,
    work_root: Path,
    fresh: bool,
    max_sessions: int,
    log_lock: threading.Lock,
    runs: int = 0,
) -> Result:
    """Fuzz one harness for ``seconds`` (restarting after each finding), or until it has run ``runs`` inputs when
    ``runs`` is set (libFuzzer ``-runs``), whichever comes first; return its figures."""
    work = work_root / name
    if fresh and work.exists():
        shutil.rmtree(work)
    (work / "findings").mkdir(parents=True, exist_ok=True)
    seed_corpus(name, work / "corpus")
    res = Result(name)
    started = time.monotonic()
    session = 0
    while session < max_sessions:
        left = seconds - (time.monotonic() - started)
        if left < 3 or (runs and res.inputs >= runs):
            break
        session += 1
        log = work / f"session-{session}.log"
        before = set((work / "findings").iterdir())
        t0 = time.monotonic()
        with open(log, "w") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "bench.fuzz", "--child", name, "--work", str(work), "--seconds", str(int(left))]
                + ([f"-runs={runs - res.inputs}"] if runs else []),
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        elapsed = time.monotonic() - t0
        text = log.read_text(errors="replace")
        stats = {
            k: int(v) for k, v in _STAT.findall("\n".join(ln for ln in text.splitlines() if ln.startswith("stat::")))
        }
        statuses = [m for m in (_STATUS.match(ln) for ln in text.splitlines()) if m]
        inputs = stats.get("number_of_executed_units") or (int(statuses[-1].group(1)) if statuses else 0)
        fuzz_elapsed = elapsed
        base = re.search(r"KOA_BASELINE_RSS_MB ([\d.]+)", text)
        if base:
            res.baseline_rss_mb = max(res.baseline_rss_mb, float(base.group(1)))
        res.inputs += inputs
        res.seconds += fuzz_elapsed
        res.sessions = session
        if statuses:
            last = statuses[-1]
            res.cov = max(res.cov, int(last.group(2)))
            res.ft = max(res.ft, int(last.group(3)))
            if last.group(4):
                res.corpus = int(last.group(4))
        rss = [int(m.group(5)) for m in statuses if m.group(5)]
        res.peak_rss_mb = max([res.peak_rss_mb, stats.get("peak_rss_mb", 0), *rss])
        new = sorted(set((work / "findings").iterdir()) - before)
        if proc.returncode != 0 or new:
            kind = (
                "blowup"
                if _BLOWUP_MARK in text or "out-of-memory" in text or "malloc limit" in text
                else "hang"
                if "libFuzzer: timeout" in text
                else "crash"
            )
            for a in new or [Path("(no artifact)")]:
                if kind == "blowup" and a.name.startswith("crash-"):
                    a = a.rename(a.with_name("oom-" + a.name[len("crash-") :]))
                res.findings.append(
                    Finding(
                        kind, str(a.relative_to(REPO)) if a.is_absolute() else str(a), _signature(kind, text), session
                    )
                )
            with log_lock:
                print(f"  {name}: {kind} in session {session}: {res.findings[-1].signature}", flush=True)
            continue
        break  # time used up
    return res


def _fmt(n: float) -> str:
    return f"{n:,.0f}"


def _commit() -> str:
    """The audited code's git commit (``+dirty`` when the work tree has changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "audit", "bench"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def render_md(results: list[Result], meta: dict) -> str:
    """The Markdown report of a run: how it was run, the per-harness table with a total row, whether the
    target was reached, and every finding with its input file."""
    tot = Result("**total**", seconds=sum(r.seconds for r in results), inputs=sum(r.inputs for r in results))
    lines = [
        "# Fuzzing the byte-level decoders",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Run {meta['started']} at commit `{meta.get('commit', 'unknown')}` on {meta['machine']}; atheris {meta['atheris']} (libFuzzer), Python {meta['python']}; "
        f"{meta['jobs']} harness(es) at a time, {meta['seconds']} s per harness.  Per-input timeout "
        f"{TIMEOUT_S} s (hang), memory blow-up = an input whose peak RSS passes the RSS before it by more than "
        f"{BLOWUP_MB} MiB (libFuzzer -rss_limit_mb: start-up RSS + {BLOWUP_MB + 128} MiB), "
        f"-max_len {MAX_LEN} bytes.  `cov`/`ft`: libFuzzer's edge and feature counts over the instrumented "
        "`audit` package at the end of the run; `corpus`: inputs kept.",
        "",
        "| harness | inputs | inputs/s | cov | ft | corpus | crashes | hangs | blow-ups | peak RSS MiB (start-up) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.harness} | {_fmt(r.inputs)} | {_fmt(r.rate)} | {r.cov} | {r.ft} | {r.corpus} | {r.crashes} "
            f"| {r.hangs} | {r.blowups} | {r.peak_rss_mb} ({r.baseline_rss_mb:.0f}) |"
        )
    lines.append(
        f"| **total** | **{_fmt(tot.inputs)}** | {_fmt(tot.rate)} | {sum(r.cov for r in results)} "
        f"| {sum(r.ft for r in results)} | {sum(r.corpus for r in results)} "
        f"| **{sum(r.crashes for r in results)}** | **{sum(r.hangs for r in results)}** "
        f"| **{sum(r.blowups for r in results)}** | {max([r.peak_rss_mb for r in results] or [0])} |"
    )
    lines.append("")
    target = 10_000_000
    ok = tot.inputs >= target and not any(r.findings for r in results)
    lines.append(
        f"Target: >= {target:,} inputs in total with 0 crashes, 0 hangs, 0 blow-ups: "
        + (
            "**reached**."
            if ok
            else f"**not reached** ({_fmt(tot.inputs)} inputs, {sum(len(r.findings) for r in results)} findings)."
        )
    )
    findings = [(r.harness, f) for r in results for f in r.findings]
    if findings:
        lines += ["", "## Findings", "", "| harness | kind | signature | input |", "|---|---|---|---|"]
        for name, f in findings:
            lines.append(f"| {name} | {f.kind} | {f.signature} | `{f.artifact}` |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring).  Returns 0 when no harness found anything, 1 otherwise;
    ``--child`` runs one libFuzzer process instead (internal)."""
    ap = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="fuzzing time per harness (default 60)")
    ap.add_argument("--runs", type=int, default=0, help="stop a harness after this many inputs (default: time only)")
    ap.add_argument("--harness", action="append", help="harness name (repeatable; default: all)")
    ap.add_argument("--out", default="bench/fuzz", help="writes OUT.md and OUT.json (default bench/fuzz)")
    ap.add_argument("--jobs", type=int, default=1, help="harnesses fuzzed at the same time (default 1)")
    ap.add_argument("--work", default=str(WORK), help="work directory (default .fuzz-work, git-ignored)")
    ap.add_argument("--fresh", action="store_true", help="start every corpus again from the seeds")
    ap.add_argument("--max-sessions", type=int, default=200, help="restarts after findings, per harness")
    ap.add_argument("--write-seeds", action="store_true", help="write the small committed seeds and exit")
    ap.add_argument("--list", action="store_true", help="list the harnesses and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args, extra = ap.parse_known_args(argv)
    if args.child:
        child(args.child, Path(args.work), args.seconds, extra)
        return 0
    from bench import fuzz_harnesses as fh

    if args.list:
        for name, h in fh.HARNESSES.items():
            print(f"{name:26s} {h.doc}")
        return 0
    if args.write_seeds:
        total = write_committed_seeds(args.harness)
        print(f"wrote {total:,} bytes of seeds under {fh.SEED_DIR.relative_to(REPO)}")
        return 0
    names = args.harness or list(fh.HARNESSES)
    unknown = [n for n in names if n not in fh.HARNESSES]
    if unknown:
        ap.error(f"unknown harness(es) {unknown}; see --list")
    import atheris  # noqa: F401  (fail early when the fuzz extra is not installed)

    meta = {
        "command": "python -m bench.fuzz " + " ".join(sys.argv[1:] if argv is None else argv),
        "started": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "python": platform.python_version(),
        "atheris": _version("atheris"),
        "jobs": args.jobs,
        "seconds": args.seconds,
        "commit": _commit(),
    }
    lock = threading.Lock()
    print(f"fuzzing {len(names)} harness(es), {args.seconds} s each, {args.jobs} at a time", flush=True)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [
            pool.submit(run_harness, n, args.seconds, Path(args.work), args.fresh, args.max_sessions, lock, args.runs)
            for n in names
        ]
        results = []
        for f in futures:
            r = f.result()
            results.append(r)
            with lock:
                print(
                    f"{r.harness:26s} {r.inputs:>12,} inputs {r.rate:>9,.0f}/s cov {r.cov:>5} ft {r.ft:>6} "
                    f"crashes {r.crashes} hangs {r.hangs} blow-ups {r.blowups} peak {r.peak_rss_mb} MiB",
                    flush=True,
                )
    meta["wall_seconds"] = round(time.monotonic() - t0, 1)
    md = render_md(results, meta)
    print(md)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(str(out) + ".md").write_text(md)
    doc = {
        "meta": meta,
        "harnesses": [
            dict(asdict(r), crashes=r.crashes, hangs=r.hangs, blowups=r.blowups, inputs_per_second=round(r.rate, 1))
            for r in results
        ],
        "total": {
            "inputs": sum(r.inputs for r in results),
            "crashes": sum(r.crashes for r in results),
            "hangs": sum(r.hangs for r in results),
            "blowups": sum(r.blowups for r in results),
            "seconds": round(sum(r.seconds for r in results), 1),
        },
    }
    Path(str(out) + ".json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if not any(r.findings for r in results) else 1


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


#: Committed seeds: per harness at most this many files of at most this many bytes each.
SEED_FILES, SEED_BYTES = 6, 12 << 10


def write_committed_seeds(names: list[str] | None = None) -> int:
    """Write a few small seeds per harness (every one, or those in ``names``) under
    ``tests/data/fuzz-seeds/<harness>/`` (so the regression test replays real-shaped input without the shared
    data); returns the bytes written."""
    from bench import fuzz_harnesses as fh

    total = 0
    for name in names or fh.HARNESSES:
        d = fh.SEED_DIR / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        seeds = fh.build_seeds(name)
        small = [(n, b) for n, b in seeds if len(b) <= SEED_BYTES]
        if len(small) < SEED_FILES:  # trim larger segments to their leading batches
            small += [
                (n, fh.trim(b, SEED_BYTES))
                for n, b in seeds
                if len(b) > SEED_BYTES and name not in ("tail_scan_index",)
            ]
        small = fh.dedup(small)
        step = max(len(small) / SEED_FILES, 1)  # spread over the sources, not the first few of one
        picked = [small[int(i * step)] for i in range(min(SEED_FILES, len(small)))]
        for label, data in picked:
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:80]
            (d / safe).write_bytes(data)
            total += len(data)
    return total


if __name__ == "__main__":
    sys.exit(main())
