"""Compare two audits' outputs table by table: the check that a refactoring changed no result.

    python -m bench.compare_outputs OUT_BEFORE OUT_AFTER

Every Parquet table (each directory holding ``*.parquet`` files) must have the same schema (names, types,
order) and the same rows (compared as sorted multisets: Spark writes a table's rows in an order no contract
fixes).  ``summary.json`` must be equal except for what differs between any two runs: times, paths, the run's
own id.  Parquet files are not compared byte for byte: their names carry a per-write UUID and their footers the
writer's build.  Exit status 0 when equal, 1 with the differences listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: summary.json keys that differ between any two runs of the same input (at any depth)
VOLATILE = {"started_at", "elapsed_seconds", "output_leftovers", "output", "run_dir", "previous_run_dir"}


def _tables(root: Path) -> dict[str, Path]:
    return {
        str(d.relative_to(root)): d
        for d in sorted(root.rglob("*"))
        if d.is_dir() and any(d.glob("*.parquet")) and not any(p.name == "_temporary" for p in d.parents)
    }


def _rows(path: Path):
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    rows = table.to_pylist()
    return table.schema, sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _scrub(obj):
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


def compare(before: Path, after: Path) -> list[str]:
    """The differences between two output directories (empty: the same results)."""
    diffs = []
    a, b = _tables(before), _tables(after)
    for name in sorted(set(a) ^ set(b)):
        diffs.append(f"{name}: only in {'before' if name in a else 'after'}")
    for name in sorted(set(a) & set(b)):
        (sa, ra), (sb, rb) = _rows(a[name]), _rows(b[name])
        if not sa.equals(sb, check_metadata=False):
            diffs.append(f"{name}: schema differs:\n  before {sa}\n  after  {sb}")
        elif ra != rb:
            missing = [r for r in ra if r not in rb][:3]
            extra = [r for r in rb if r not in ra][:3]
            diffs.append(f"{name}: rows differ ({len(ra)} vs {len(rb)}); before only {missing}; after only {extra}")
    ja, jb = before / "summary.json", after / "summary.json"
    if ja.exists() != jb.exists():
        diffs.append("summary.json: only in one")
    elif ja.exists():
        sa, sb = _scrub(json.loads(ja.read_text())), _scrub(json.loads(jb.read_text()))
        for key in sorted(set(sa) | set(sb)):
            if sa.get(key) != sb.get(key):
                diffs.append(f"summary.json {key}: {sa.get(key)!r} != {sb.get(key)!r}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    diffs = compare(args.before, args.after)
    for d in diffs:
        print(d)
    print(f"{len(_tables(args.before))} tables compared: {'the same' if not diffs else f'{len(diffs)} difference(s)'}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
