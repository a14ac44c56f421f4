"""bench.speed's one table: each verdict follows from the saved figures of its steps."""

from bench.speed import render, table


def _results(heap_100m=700.0, lc_seconds=35.0):
    small = {
        "pairs": 2,
        "bare_median_s": 10.0,
        "reports": {"median_s": 14.0, "ratio": 1.4},
        "skip_reports": {"median_s": 12.5, "ratio": 1.25},
    }
    m20 = {
        "rows": [
            {"n": 10_000, "run_seconds": 20.0, "runs": [{"run_seconds": 20.0}, {"run_seconds": 21.0}]},
            {
                "n": 20_000_000,
                "run_seconds": 29.0,
                "runs": [{"run_seconds": 30.0}, {"run_seconds": 29.0}],
                "naive_records_per_second": 250_000,
            },
        ]
    }
    m100 = {
        "rows": [
            {
                "n": 20_000_000,
                "run_seconds": 31.0,
                "runs": [{"run_seconds": 31.0}],
                "findings_as_expected": True,
                "driver_python_peak_rss_mib": 500.0,
                "jvm_heap_live_at_stage_ends_mib": 400.0,
            },
            {
                "n": 100_000_000,
                "run_seconds": 55.0,
                "runs": [{"run_seconds": 55.0}],
                "findings_as_expected": True,
                "driver_python_peak_rss_mib": 505.0,
                "jvm_heap_live_at_stage_ends_mib": heap_100m,
            },
        ]
    }

    def one(seconds):
        return {"rows": [{"n": 20_000_000, "run_seconds": seconds, "runs": [{"run_seconds": seconds}]}]}

    return {
        "small.json": small,
        "small-live.json": None,
        "m20.json": m20,
        "m100.json": m100,
        "lc-local-1.json": one(28.0),
        "lc-cluster-1.json": one(lc_seconds),
        "lc-local-2.json": one(30.0),
        "lc-cluster-2.json": one(lc_seconds + 2.0),
        "meta": {"started": "a", "finished": "b", "cpus": 2},
    }


def test_each_verdict_follows_from_its_figures():
    rows, ok = table(_results())
    assert [r[0] for r in rows] == ["1", "1", "2", "2", "3", "3", "3", "3", "4"]
    assert [r[4] for r in rows] == ["PASS", "FAIL", "PASS", "PASS", "PASS", "PASS", "FAIL", "PASS", "n/a"]
    assert "2,221,111/s" in rows[2][2] and "8.88x" in rows[3][2]  # 19,990,000 commits in 9 s
    assert "36.0 s ÷ 29.0 s = 1.24x (runs 28.0, 35.0, 30.0, 37.0)" in rows[7][2]  # medians of the alternated runs
    assert not ok and render(_results()).endswith("some target NOT met")


def test_every_target_met():
    rows, ok = table(
        _results(heap_100m=450.0, lc_seconds=35.0)
        | {
            "small.json": {
                "pairs": 1,
                "bare_median_s": 10.0,
                "reports": {"median_s": 14.0, "ratio": 1.4},
                "skip_reports": {"median_s": 11.5, "ratio": 1.15},
            }
        }
    )
    assert ok and "(1 pair, medians)" in rows[0][1]
    rows, ok = table(_results(heap_100m=450.0, lc_seconds=36.0))  # 37 / 29 = 1.28x
    assert rows[7][4] == "FAIL" and not ok


def test_a_larger_run_that_is_not_slower_measures_nothing_and_fails():
    """Noise, not a rate: when the larger run takes no longer than the smaller one, the marginal rate is not
    measured and its rows fail (an infinite rate once passed)."""
    res = _results()
    res["m20.json"]["rows"][1]["run_seconds"] = 20.0  # 20M commits as fast as 10k
    rows, ok = table(res)
    assert rows[2][4] == "FAIL" and "not measured" in rows[2][2]
    assert rows[3][4] == "FAIL" and rows[3][2] == "-"
    assert not ok


def test_run_benchmark_marginal_rate_needs_a_slower_larger_run():
    """bench/run_benchmark.py's marginal-rate target: a rate only when the larger run took longer."""
    from bench.run_benchmark import TARGET_MARGINAL, evaluate

    def row(n, seconds):
        return {"n": n, "run_seconds": seconds, "commits_per_second": n / seconds}

    def marginal(rows):
        (t,) = [t for t in evaluate(rows) if t["target"].startswith("marginal rate (")]
        return t

    same = marginal([row(10_000, 20.0), row(20_000_000, 20.0)])
    assert same["pass"] is False and "not measured" in same["value"]
    fast = (20_000_000 - 10_000) / (TARGET_MARGINAL * 2)  # twice the target's rate
    assert marginal([row(10_000, 20.0), row(20_000_000, 20.0 + fast)])["pass"] is True
