"""Lag as Kafka's own tool prints it: ``kafka-consumer-groups --describe --all-groups`` (ConsumerGroupCommand from
Maven Central's kafka-tools) against the lab cluster the live audit read, compared with ``committed_offsets/``'s
``lag`` and ``groups/``' sums.  The cluster takes no write after the audit, so both read the same offsets."""

from __future__ import annotations

import subprocess

import pyarrow.parquet as pq

from . import kafka_dist


def _describe(bootstrap: str, version: str) -> list[dict]:
    cmd = kafka_dist.consumer_groups_command(version, bootstrap, "--describe", "--all-groups")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows, head = [], None
    for line in proc.stdout.splitlines():
        cells = line.split()
        if cells[:3] == ["GROUP", "TOPIC", "PARTITION"]:
            head = cells
        elif head and len(cells) >= 6:
            rows.append(dict(zip(head, cells)))
    assert rows, proc.stdout[-3000:]
    return rows


def test_lag_is_kafka_consumer_groups_lag(lab_live):
    bootstrap, out = lab_live
    tool = _describe(bootstrap, kafka_dist.versions()[0])
    committed = {
        (r["group_id"], r["topic"], r["partition"]): r
        for r in pq.read_table(str(out / "committed_offsets")).to_pylist()
    }
    compared, negative = 0, 0
    for t in tool:
        if t["CURRENT-OFFSET"] == "-":  # no commit for that partition: nothing to compare
            continue
        ours = committed[t["GROUP"], t["TOPIC"], int(t["PARTITION"])]
        assert (ours["committed_offset"], ours["log_end_offset"]) == (
            int(t["CURRENT-OFFSET"]),
            int(t["LOG-END-OFFSET"]),
        ), (t, ours)
        tool_lag = int(t["LAG"])
        # equal wherever the tool does not clamp; where it does (a commit past the log end), ours stays negative
        assert ours["lag"] == tool_lag or (tool_lag == 0 and ours["lag"] < 0), (t, ours)
        assert ours["lag"] == ours["log_end_offset"] - ours["committed_offset"]
        compared += 1
        negative += ours["lag"] < 0
    assert compared == len(committed) and negative == 1  # the replayer's commit past the log end
    groups = {r["group_id"]: r for r in pq.read_table(str(out / "groups")).to_pylist()}
    for gid, g in groups.items():
        lags = [r["lag"] for k, r in committed.items() if k[0] == gid]
        assert (g["partitions_committed"], g["total_lag"], g["max_lag"]) == (len(lags), sum(lags), max(lags))
    assert groups["replayer"]["status"] == "AT_RISK" and groups["app"]["status"] == "OK"
