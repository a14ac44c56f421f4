"""``kafka-offset-audit plan``: a finished audit's reset plan, made again from its tables without Spark.

It reads the output's ``findings/``, ``groups/`` and ``bounds/`` with pyarrow and writes the plan
(:mod:`audit.report.reset_plan`) into ``--to`` (replaced whole), for another ``--fail-on`` than the audit's or an
output copied from an object store.  It never applies it.
"""

from __future__ import annotations

import sys

from ..tables import FAIL_ON_CHOICES
from .output import EXIT_OK, EXIT_USAGE

__all__ = ["add_plan_arguments", "run_plan"]


def add_plan_arguments(p) -> None:
    """Add the ``plan`` subcommand's flags to the argparse parser ``p``."""
    p.add_argument("--output", required=True, metavar="DIR", help="a local audit output (its --output)")
    p.add_argument(
        "--fail-on",
        choices=list(FAIL_ON_CHOICES),
        default=None,
        help="plan the groups with a finding of this severity or worse (default: the audit's --fail-on)",
    )
    p.add_argument("--to", metavar="DIR", default="reset_plan", help="where the plan goes (default: %(default)s)")


def run_plan(args) -> int:
    """Run ``kafka-offset-audit plan``; return the exit status (2 for an output that is not a local audit's)."""
    from ..io import fs
    from ..io.outputs import read_audit_summary
    from ..report.reset_plan import build_reset_plan, read_plan_inputs, write_reset_plan

    summary = read_audit_summary(None, args.output) if fs.is_local(args.output) else None
    if summary is None:
        print(
            f"kafka-offset-audit: error: {args.output} holds no kafka-offset-audit output (no summary.json): give the "
            "local --output of an audit",
            file=sys.stderr,
        )
        return EXIT_USAGE
    fail_on = args.fail_on or (summary.get("inputs") or {}).get("fail_on") or "error"
    plan = build_reset_plan(fail_on=fail_on, **read_plan_inputs(fs.local_path(args.output)))
    write_reset_plan(plan, args.to)
    counts = plan.summary()
    print(
        f"{args.to}: {counts['groups']} group(s), {counts['group_partitions']} group-partition(s) to reset "
        f"(--fail-on {fail_on}); {counts['groups_without_plan']} group(s) without a plan; see {args.to}/README.md"
    )
    return EXIT_OK
