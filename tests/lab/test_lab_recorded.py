"""Kafka 4.x scenarios recorded by the lab (``tests/data/lab-scenarios/*``, provenance in each README):
the offline audit of every node's log dir agrees with the verdicts Kafka's own consumer gave when they
were recorded, in both modes. No cluster or Maven needed: this guards the 4.x offline path on every run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import differential

RECORDED = sorted((Path(__file__).parents[1] / "data" / "lab-scenarios").glob("kafka-*"))


@pytest.mark.parametrize("mode", ["latest", "history"])
@pytest.mark.parametrize("recorded", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_scenario_agrees_with_kafkas_consumer(audit_dirs, recorded, mode):
    meta = json.loads((recorded / "scenario.json").read_text())
    result, out = audit_dirs(f"{recorded.name}-{mode}", [recorded / "brokers"], mode=mode)
    rows = differential.compare(meta["verdicts"], out)
    assert len(rows) == len(meta["judged"]) > 0
    assert {"LogTruncationException", "OK"} <= {r["oracle"] for r in rows}
    bad = [r for r in rows if not r["agree"]]
    assert not bad, differential.describe_disagreements(rows, meta["seed"], meta["version"], f"recorded {mode}")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_skipped"]["by_reason"] == {}, summary["records_skipped"]


def test_two_kafka_4_scenarios_are_recorded():
    assert len([p for p in RECORDED if p.name.startswith("kafka-4.")]) >= 2


@pytest.mark.parametrize("recorded", RECORDED, ids=[p.name for p in RECORDED])
def test_recorded_truncation_causes(audit_dirs, recorded):
    """Each truncation of an unclean episode names the unclean election and the broker the scenario elected
    uncleanly (its schedule's F); a stale-epoch episode's is a stale client epoch, a commit past the log end's unknown."""
    meta = json.loads((recorded / "scenario.json").read_text())
    unclean_leader = next(s["F"] for s in meta["schedule"] if s["step"] == "started")
    _result, out = audit_dirs(f"{recorded.name}-causes", [recorded / "brokers"])
    causes = differential.truncation_causes(meta["verdicts"], out)
    unclean = {k: v for k, v in causes.items() if ".unclean." in k[0]}
    assert len(unclean) >= 3
    assert all(v == ("unclean_election", 2, unclean_leader) for v in unclean.values()), (unclean, unclean_leader)
    stale = {k: v for k, v in causes.items() if ".stale_epoch." in k[0]}
    assert all(v is not None and v[0] == "stale_client_epoch" for v in stale.values()), stale
    # a commit past the log end in the partition's current epoch: nothing in the log says why
    beyond = {k: v for k, v in causes.items() if ".beyond_end." in k[0]}
    assert all(v == ("unknown", None, None) for v in beyond.values()), beyond
    assert stale or beyond
