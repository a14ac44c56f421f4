"""Reset plans: per group, the file Kafka's reset tool takes with ``--reset-offsets --from-file``, and its effect.

A plan is written for each group with a finding a reset answers: a consumer group's applies with
``kafka-consumer-groups``, a share group's (KIP-932) with ``kafka-share-groups``.

Kafka's tools (``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`` and ``ShareGroupCommand``: both
parse the file with ``GroupOffsetsResetter.parseResetPlan``) read a reset plan as CSV lines without a header:
``topic,partition,offset`` when one ``--group`` is given (``CsvRecordNoGroup``), ``group,topic,partition,offset``
otherwise (the share tool takes one group only); each resets a group only while it is ``Empty`` or ``Dead``, and
clamps each offset into the partition's ``[log start, latest]`` range (``checkOffsetsRange``).  The audit writes
one file per group in the first form, and never applies it.  ``kafka-share-groups`` takes ``--from-file`` from
Kafka 4.4 on (checked with 4.4.0's tool); its ``--export`` prints the same single-group form.

Which offset answers which finding (the rule is named on each row):

* ``LOG_TRUNCATION`` -- the divergence offset: the first offset the log was truncated at.  A consumer group then
  reads the records the current leader holds from there, which it would otherwise never read.  A share group's
  share-partition starts again there with its state cleared: the current lineage's records its state counted as
  done from there on, which Kafka would otherwise never deliver, are delivered (and records it had since, again);
  when its start offset (its newest state's, ``share_partitions/``; else the finding's ``committed_offset``) is
  below the divergence offset, the start offset, so that the records from there it has not finished are not
  skipped.
* ``OFFSET_OUT_OF_RANGE`` below the log start -- the log start offset: the records below it are deleted, lost
  either way; past the log end -- the log end (the high watermark when known, what Kafka's tool clamps to): the
  group then reads the records appended from there, which it would otherwise skip.  A share group's (its start
  offset below the log start) gets no reset: Kafka moves the start offset to the log start itself, and the
  records below it are deleted; it is counted in ``findings_not_reset`` as :data:`SHARE_OUT_OF_RANGE`.
* Nothing else gets a reset: ``OFFSET_REWIND`` (the group already chose to go back), ``EPOCH_UNVERIFIABLE``,
  ``BEHIND_METADATA_EPOCH`` and ``UNKNOWN_LEADER_EPOCH`` (the consumer validates its position and recovers, or
  meets the truncation the ``LOG_TRUNCATION`` row answers), ``REPLICA_DIVERGENCE`` (no group),
  ``PARTITION_EXPANSION_ORDER`` (records already read out of order).  Streams groups
  (``kafka-streams-application-reset``) have a tool of their own: they get no plan here.

A group with members (not ``Empty``/``Dead``: the ``groups/`` row, or for a group without one, such as a share
group, its findings' ``group_state``) gets no plan: Kafka's tools refuse to reset it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from ..tables import SEVERITIES, failing_severities

__all__ = [
    "PLAN_DIRNAME",
    "RESETTABLE",
    "SHARE_OUT_OF_RANGE",
    "GroupPlan",
    "PlanRow",
    "ResetPlan",
    "build_reset_plan",
    "read_plan_inputs",
    "write_reset_plan",
]

PLAN_DIRNAME = "reset_plan"
#: the findings a reset answers, in the order one wins over another on the same group-partition
RESETTABLE = ("LOG_TRUNCATION", "OFFSET_OUT_OF_RANGE")
#: ``findings_not_reset``'s name of a share group's ``OFFSET_OUT_OF_RANGE`` (Kafka moves its start offset itself)
SHARE_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE (share group)"
_INACTIVE_STATES = ("Empty", "Dead")
#: Kafka's tool that applies a plan, by group type (any other: kafka-consumer-groups)
_TOOLS = {"share": "kafka-share-groups"}
_OTHER_TOOLS = {
    "streams": "a streams group: reset it with kafka-streams-application-reset while its application is stopped",
}


@dataclass(frozen=True)
class PlanRow:
    """One group-partition of a plan: where the group resumes after the reset, and why.

    ``committed_offset`` is a share group's share-partition start offset.  ``records`` counts the records between
    the committed offset and ``reset_to`` that the reset changes the fate of: ``effect`` says how (read instead of
    skipped, or already deleted); for a share group, the records its state counted as done from the divergence
    offset on (the finding's ``records_at_risk``), delivered instead of never.
    """

    topic: str
    partition: int
    committed_offset: int
    reset_to: int
    finding: str
    rule: str
    effect: str
    records: int


@dataclass
class GroupPlan:
    """One group's plan: its CSV file (``file``, in the plan's directory) and the commands that apply it.

    ``tool``: Kafka's ``kafka-consumer-groups``, or ``kafka-share-groups`` for a share group.
    """

    group_id: str
    file: str
    rows: list[PlanRow] = field(default_factory=list)
    tool: str = "kafka-consumer-groups"

    def commands(self) -> dict[str, str]:
        """Return Kafka's commands for this plan: ``dry_run`` first, then ``execute`` (placeholders in capitals)."""
        base = (
            f"{self.tool} --bootstrap-server BOOTSTRAP --command-config CLIENT.properties --reset-offsets "
            f"--group {shlex.quote(self.group_id)} --from-file {shlex.quote(self.file)}"
        )
        return {"dry_run": base + " --dry-run", "execute": base + " --execute"}


@dataclass
class ResetPlan:
    """Every group's plan, the groups that get none (``no_plan``: group -> why) and the findings no reset answers."""

    groups: list[GroupPlan] = field(default_factory=list)
    no_plan: dict[str, str] = field(default_factory=dict)
    not_reset: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Return summary.json's ``reset_plan``: the counts and where the plan is."""
        return {
            "dir": PLAN_DIRNAME,
            "groups": len(self.groups),
            "group_partitions": sum(len(g.rows) for g in self.groups),
            "groups_without_plan": len(self.no_plan),
            "findings_not_reset": dict(sorted(self.not_reset.items())),
        }


def _file_name(group_id: str, taken: set[str]) -> str:
    """Name a group's CSV file: its id where that is a safe file name, else a safe form with a short hash."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", group_id)[:100] or "_"
    if safe != group_id or safe.lower() in taken or safe.startswith("."):
        safe = f"{safe}-{hashlib.sha256(group_id.encode()).hexdigest()[:8]}"
    taken.add(safe.lower())
    return safe + ".csv"


def _row(f: Mapping[str, Any], high_watermark: int | None) -> PlanRow | None:
    """Return the reset answering finding ``f`` (a ``findings/`` row), or None when its offsets are unknown."""
    c, start, end = f.get("committed_offset"), f.get("log_start_offset"), f.get("log_end_offset")
    if c is None:
        return None
    if high_watermark is not None and end is not None:
        end = min(end, high_watermark)
    if f["finding"] == "LOG_TRUNCATION":
        d = f.get("divergence_offset")
        if d is None:
            return None
        to = d if end is None else min(d, end)
        return PlanRow(
            f["topic"], f["partition"], c, to, f["finding"], "the divergence offset",
            f"resumes where the current lineage begins, not at {c}: offsets {to}..{c - 1} hold records it never "
            "read (or will, as the log grows)", c - to,
        )  # fmt: skip
    if start is not None and c < start:
        return PlanRow(
            f["topic"], f["partition"], c, start, f["finding"], "the log start offset",
            f"resumes at the log start, not at {c}: the records at offsets {c}..{start - 1} are deleted, lost either way",
            start - c,
        )  # fmt: skip
    if end is not None and c > end:
        return PlanRow(
            f["topic"], f["partition"], c, end, f["finding"], "the log end offset",
            f"resumes at the log end, not at {c}: the records appended at offsets {end}..{c - 1} would be skipped",
            c - end,
        )  # fmt: skip
    return None


def _share_row(f: Mapping[str, Any], high_watermark: int | None, start_offset: int | None) -> PlanRow | None:
    """Return the reset answering a share group's ``LOG_TRUNCATION`` ``f``, or None when its offsets are unknown.

    ``start_offset``: the share-partition start offset (SPSO) of its newest state (``share_partitions/``), else the
    finding's ``committed_offset`` (the SPSO of the state it judged).  The reset goes to the divergence offset, or
    to the start offset when that is below it (a start offset moved forward would skip the records from there the
    group has not finished); Kafka writes the share-partition's state anew there, no batch counted as done.
    """
    c, d, end = f.get("committed_offset"), f.get("divergence_offset"), f.get("log_end_offset")
    spso = start_offset if start_offset is not None else c
    if spso is None or d is None:
        return None
    if high_watermark is not None and end is not None:
        end = min(end, high_watermark)
    to = min(spso, d) if end is None else min(spso, d, end)
    rule = (
        "the divergence offset"
        if to == d
        else "the share-partition start offset"
        if to == spso
        else "the log end offset"
    )
    why = (
        f"{to}, its start offset, is below the divergence offset {d}: the records from there it has not finished are "
        "not skipped (those it has, come again); "
        if to == spso < d
        else ""
    )
    at_risk = f.get("records_at_risk")
    return PlanRow(
        f["topic"], f["partition"], spso, to, f["finding"], rule,
        f"is delivered every record from {to} on, its share-partition state (start offset {spso}) cleared: {why}the "
        f"current lineage's records its state counts as done from {d} on, which Kafka would otherwise never deliver, "
        f"are delivered; any other record from {to} on it has had comes again",
        at_risk if at_risk is not None else max(spso - to, 0),
    )  # fmt: skip


def _group_refusal(group: Mapping[str, Any] | None) -> str | None:
    """Why Kafka's tool would not reset this group (or another tool is needed); None when it would.

    ``group``: its ``groups/`` row, or for a group without one (a share group: it commits no offsets) the
    ``group_type`` and ``group_state`` of one of its findings.
    """
    if group is None:
        return None
    kind = group.get("group_type")
    if kind in _OTHER_TOOLS:
        return _OTHER_TOOLS[kind]
    state, members = group.get("group_state"), group.get("group_members")
    if (state is not None and state not in _INACTIVE_STATES) or (members or 0) > 0:
        return (
            f"the group has {members or 'some'} member(s) (state {state}): Kafka resets the offsets of an inactive "
            "group only; stop its consumers, audit again, then apply the new plan"
        )
    return None


def build_reset_plan(
    findings: Iterable[Mapping[str, Any]],
    groups: Mapping[str, Mapping[str, Any]],
    fail_on: str,
    high_watermarks: Mapping[tuple[str, int], int] | None = None,
    other_findings: Mapping[tuple[str, str], int] | None = None,
    share_start_offsets: Mapping[tuple[str, str, int], int] | None = None,
) -> ResetPlan:
    """Build the reset plan of an audit's findings.

    Parameters
    ----------
    findings : iterable of mapping
        ``findings/`` rows (``group_id, topic, partition, finding, severity, committed_offset, divergence_offset,
        log_start_offset, log_end_offset``; ``group_type, group_state, records_at_risk`` when known: a share
        group's findings carry ``group_type = 'share'``).
    groups : mapping
        ``groups/`` rows by ``group_id`` (``group_state``, ``group_members``, ``group_type``); a group without one
        (share groups have none) is judged by its findings' ``group_type`` and ``group_state``.
    fail_on : str
        ``--fail-on``: the groups planned are those with a finding at or above it; with ``never``, every group
        with a finding a reset answers.
    high_watermarks : mapping, optional
        ``(topic, partition) -> high watermark`` (``bounds/``): a reset past the log end goes no further.
    other_findings : mapping, optional
        ``(finding, severity) -> count`` of the groups' findings no reset answers, when ``findings`` holds only
        those of :data:`RESETTABLE` (:func:`read_plan_inputs`).
    share_start_offsets : mapping, optional
        ``(group_id, topic, partition) -> start offset`` of each share-partition's newest state
        (``share_partitions/``): a share group's reset goes no further than it.

    Returns
    -------
    ResetPlan
        Groups in ``group_id`` order, rows in ``(topic, partition)`` order.  A share group's plan applies with
        ``kafka-share-groups``; its ``OFFSET_OUT_OF_RANGE`` findings are counted as :data:`SHARE_OUT_OF_RANGE`.
    """
    gate = set(failing_severities(fail_on)) if fail_on != "never" else set(SEVERITIES)
    hw = high_watermarks or {}
    chosen: dict[str, dict[tuple[str, int], PlanRow]] = {}
    seen: dict[str, Mapping[str, Any]] = {}  # group -> its type and state as one of its findings has them
    plan = ResetPlan()
    for f in findings:
        group = f.get("group_id")
        if group is None or f.get("severity") not in gate:
            continue
        if f["finding"] not in RESETTABLE:
            plan.not_reset[f["finding"]] = plan.not_reset.get(f["finding"], 0) + 1
            continue
        kind = f.get("group_type") or (groups.get(group) or {}).get("group_type")
        share = (
            seen.setdefault(group, {"group_type": kind, "group_state": f.get("group_state")})["group_type"] == "share"
        )
        if share and f["finding"] == "OFFSET_OUT_OF_RANGE":
            plan.not_reset[SHARE_OUT_OF_RANGE] = plan.not_reset.get(SHARE_OUT_OF_RANGE, 0) + 1
            continue
        bound = hw.get((f["topic"], f["partition"]))
        if share:
            row = _share_row(f, bound, (share_start_offsets or {}).get((group, f["topic"], f["partition"])))
        else:
            row = _row(f, bound)
        if row is None:
            continue
        key = (row.topic, row.partition)
        have = chosen.setdefault(group, {}).get(key)
        if have is None or RESETTABLE.index(row.finding) < RESETTABLE.index(have.finding):
            chosen[group][key] = row
    for (name, severity), n in (other_findings or {}).items():
        if severity in gate:
            plan.not_reset[name] = plan.not_reset.get(name, 0) + n
    taken: set[str] = set()
    for group in sorted(chosen):
        known = groups.get(group) or seen[group]
        refusal = _group_refusal(known)
        if refusal is not None:
            plan.no_plan[group] = refusal
            continue
        rows = [chosen[group][k] for k in sorted(chosen[group])]
        tool = _TOOLS.get(seen[group]["group_type"], "kafka-consumer-groups")
        plan.groups.append(GroupPlan(group, _file_name(group, taken), rows, tool))
    return plan


def read_plan_inputs(tables_dir: str) -> dict[str, Any]:
    """Read what a plan needs from a local output's tables with pyarrow (no Spark).

    Returns
    -------
    dict
        :func:`build_reset_plan`'s keyword arguments but ``fail_on``: ``findings`` (the rows of
        :data:`RESETTABLE` findings, with their ``records_at_risk``, ``group_type`` and ``group_state``),
        ``groups`` (``groups/`` rows by group id; empty without the table), ``high_watermarks`` (``bounds/``), ``other_findings`` (the groups' other findings counted by name and
        severity) and ``share_start_offsets`` (``share_partitions/``; empty without the table).

    Raises
    ------
    FileNotFoundError
        ``tables_dir`` has no ``findings/``.
    """
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    def table(name: str, columns: list[str], where=None):
        path = os.path.join(tables_dir, name)
        if not os.path.isdir(path):
            return None
        data = ds.dataset(path, format="parquet")
        have = set(data.schema.names)
        return data.to_table(columns=[c for c in columns if c in have], filter=where)

    cols = ["group_id", "topic", "partition", "finding", "severity", "committed_offset", "divergence_offset"]
    more = ["log_start_offset", "log_end_offset", "records_at_risk", "group_type", "group_state"]
    found = table("findings", [*cols, *more], pc.field("finding").isin(RESETTABLE))
    if found is None:
        raise FileNotFoundError(f"{tables_dir} has no findings/ table: give the --output of an audit")
    others = table(
        "findings", ["finding", "severity"], ~pc.field("finding").isin(RESETTABLE) & pc.field("group_id").is_valid()
    )
    counted = others.group_by(["finding", "severity"]).aggregate([("finding", "count")]).to_pylist()
    groups = table("groups", ["group_id", "group_state", "group_members", "group_type"])
    bounds = table("bounds", ["topic", "partition", "high_watermark"], pc.field("high_watermark").is_valid())
    shares = table("share_partitions", ["group_id", "topic", "partition", "start_offset"])
    return {
        "findings": found.to_pylist(),
        "groups": {g["group_id"]: g for g in (groups.to_pylist() if groups is not None else [])},
        "high_watermarks": {(b["topic"], b["partition"]): b["high_watermark"] for b in bounds.to_pylist()},
        "other_findings": {(c["finding"], c["severity"]): c["finding_count"] for c in counted},
        "share_start_offsets": {
            (s["group_id"], s["topic"], s["partition"]): s["start_offset"]
            for s in (shares.to_pylist() if shares is not None else [])
        },
    }


def _readme(plan: ResetPlan) -> str:
    lines = [
        "# Reset plan",
        "",
        "Written by kafka-offset-audit, never applied by it. For each group: stop its consumers (Kafka resets an",
        "inactive group only), check the plan with --dry-run, then apply it with --execute. Replace BOOTSTRAP and",
        "CLIENT.properties with your cluster's bootstrap servers and client properties (as for the audit).",
        "",
    ]
    if any(g.tool == _TOOLS["share"] for g in plan.groups):
        lines += [
            "A share group's plan is applied with kafka-share-groups, whose --reset-offsets takes --from-file from",
            "Kafka 4.4 on (checked with 4.4.0's tool): check that yours lists --from-file in its --help.",
            "",
        ]
    for g in plan.groups:
        lines += [f"## {g.group_id}", ""]
        for r in g.rows:
            lines.append(
                f"- {r.topic}-{r.partition}: {r.committed_offset} -> {r.reset_to} ({r.finding}, {r.rule}): the group "
                f"{r.effect} ({r.records} records)"
            )
        cmds = g.commands()
        lines += ["", "```bash", cmds["dry_run"], cmds["execute"], "```", ""]
    if plan.no_plan:
        lines += ["## Groups without a plan", ""] + [f"- {g}: {why}" for g, why in sorted(plan.no_plan.items())]
        lines.append("")
    if plan.not_reset:
        lines += ["## Findings no reset answers", ""]
        lines += [f"- {name}: {n} (see the findings reference)" for name, n in sorted(plan.not_reset.items())]
        lines.append("")
    return "\n".join(lines)


def write_reset_plan(plan: ResetPlan, directory: str) -> str:
    """Write ``plan`` into ``directory`` (replaced whole): a CSV per group, ``plan.json`` and ``README.md``.

    Returns
    -------
    str
        ``directory``.
    """
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".reset-plan-", dir=parent)
    try:
        for g in plan.groups:
            with open(os.path.join(tmp, g.file), "w", encoding="utf-8", newline="") as fh:
                fh.writelines(f"{r.topic},{r.partition},{r.reset_to}\n" for r in g.rows)
        doc = {
            "groups": [
                {
                    "group_id": g.group_id,
                    "file": g.file,
                    "tool": g.tool,
                    "commands": g.commands(),
                    "rows": [asdict(r) for r in g.rows],
                }
                for g in plan.groups
            ],
            "no_plan": [{"group_id": k, "reason": v} for k, v in sorted(plan.no_plan.items())],
            "findings_not_reset": plan.not_reset,
        }
        with open(os.path.join(tmp, "plan.json"), "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as fh:
            fh.write(_readme(plan))
        if os.path.isdir(directory):
            shutil.rmtree(directory)
        os.replace(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory
