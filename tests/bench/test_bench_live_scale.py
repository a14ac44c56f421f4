"""bench.live_scale's table: each verdict follows from the saved figures (no verdict is given, every one judged)."""

from bench.live_scale import table


def _results(
    audit_large=66.3, worker_large=305.0, fetches=532, sizes=((52_428_800, 1_048_576),), quota_exit=1, quota_wall=79.0
):
    def audit(wall, worker):
        return {
            "wall_s": wall,
            "exit": 1,
            "peak_rss_mib": {"driver_python": 645.0, "driver_jvm": 2000.0, "python_worker": worker},
        }

    return {
        "started": "2026-11-27 18:58:20",
        "finished": "2026-11-27 19:10:35",
        "version": "4.4.0",
        "cpus": 2,
        "quick": False,
        "scenario_s": 100.0,
        "fill_s": 428.0,
        "shape": {"groups": 10_090, "group_partitions": 200_000},
        "rows": [
            {
                "label": "small",
                "audit_kafka-python": audit(43.5, 189.0),
                "read_only": {"records": 1_000_164, "seconds": 9.8},
                "consumer_groups_describe": {"wall_s": 38.3},
                "console_consumer": {"wall_s": 5.0},
            },
            {
                "label": "large",
                "audit_kafka-python": audit(audit_large, worker_large),
                "read_only": {"records": 20_000_167, "seconds": 38.7},
                "consumer_groups_describe": {"wall_s": 37.6},
                "console_consumer": {"wall_s": 40.5},
            },
        ],
        "brokers": {
            "1": {
                "requests": {"FETCH": fetches, "METADATA": 3},
                "connections": 4,
                "peak_in_flight": 2,
                "fetch_max_bytes": [list(s) for s in sizes],
            }
        },
        "logged_run": {"wall_s": 64.8, "exit": 1},
        "quota_run": {"wall_s": quota_wall, "exit": quota_exit, "consumer_byte_rate": 20_971_520},
        "offline": {"wall_s": 57.1, "exit": 1},
    }


def _verdicts(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines()[3:]:
        measure, _figure, _target, verdict = (c.strip() for c in line.rsplit(" | ", 3))
        out[measure] = verdict
    return out


def _one(verdicts: dict[str, str], words: str) -> str:
    (hit,) = [v for m, v in verdicts.items() if words in m]
    return hit


def test_the_measured_run_reads_as_it_was_judged():
    v = _verdicts(table(_results()))
    assert _one(v, "÷ kafka-consumer-groups --describe") == "FAIL"  # 66.3 s against 37.6 s
    assert _one(v, "marginal read rate") == "FAIL"  # 19M records in 22.8 s: 833k/s
    assert _one(v, "python worker peak RSS") == "FAIL"  # 305 / 189 = 1.61x
    assert _one(v, "driver python peak RSS") == "PASS"
    assert _one(v, "read of __consumer_offsets alone") == "PASS"  # 38.7 s against 40.5 s
    assert _one(v, "live audit ÷ offline audit") == "PASS"
    assert _one(v, "broker 1") == "PASS"
    assert _one(v, "quota") == "PASS"


def test_each_target_turns_on_its_own_figure():
    v = _verdicts(table(_results(audit_large=35.0, worker_large=250.0)))
    assert _one(v, "÷ kafka-consumer-groups --describe") == "PASS"
    assert _one(v, "python worker peak RSS") == "PASS"  # 250 / 189 = 1.32x
    # the larger run faster than the smaller one: noise, not an infinite rate
    assert _one(v, "marginal read rate") == "FAIL"
    assert _one(_verdicts(table(_results(audit_large=60.0))), "marginal read rate") == "PASS"  # 19M in 16.5 s


def test_requests_per_group_or_other_fetch_sizes_fail_the_broker_row():
    assert _one(_verdicts(table(_results(fetches=10_090))), "broker 1") == "FAIL"
    assert _one(_verdicts(table(_results(sizes=((52_428_800, 1_048_576), (1 << 30, 1 << 30))))), "broker 1") == "FAIL"
    assert _one(_verdicts(table(_results(quota_exit=2))), "quota") == "FAIL"
    # a quota that did not slow the run was not applied: the row says slower
    assert _one(_verdicts(table(_results(quota_wall=60.0))), "quota") == "FAIL"
