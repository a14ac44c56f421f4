"""The lab's episode plans, without a cluster: CI's default seeds run every episode kind on some version, and the plan
a seed is said to run is the one :func:`tests.lab.scenario.run_scenario` draws."""

from __future__ import annotations

import random

from tests.lab import kafka_dist, scenario


def test_default_seeds_run_every_episode_kind():
    versions = kafka_dist.versions()
    cases = list(zip(versions, scenario.covering_seeds(versions), strict=True))
    assert scenario.uncovered_kinds(cases) == set(), cases


def test_uncovered_kinds_names_what_a_seed_choice_misses():
    # seed 1 on 4.4.0 runs no beyond_end, expansion or txn episode
    plan = scenario.planned_episodes(1, "4.4.0")
    assert scenario.uncovered_kinds([("4.4.0", 1)]) == set(scenario.KINDS) - set(plan)
    assert scenario.uncovered_kinds([("4.4.0", 1)])


def test_planned_episodes_follow_the_schedules_generator():
    for seed, version in [(1, "4.4.0"), (2, "3.9.2"), (16, "4.4.0")]:
        rng = random.Random(f"{seed}/{version}")
        rng.sample(range(1, 4), 2)
        assert scenario.planned_episodes(seed, version) == scenario.plan_episodes(rng)
        _rng, L, F = scenario.schedule_rng(seed, version)
        assert L != F and {L, F} <= {1, 2, 3}
