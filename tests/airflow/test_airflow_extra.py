"""The ``[airflow]`` extra of pyproject.toml pins what ``requirements-airflow.txt`` (the Airflow environment
``scripts/airflow_env.sh`` builds) pins, so ``pip install 'kafka-offset-audit[airflow]'`` and the script agree."""

from __future__ import annotations

import tomllib

from ..paths import REPO


def _requirements() -> set[str]:
    lines = (REPO / "requirements-airflow.txt").read_text().splitlines()
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


def test_the_airflow_extra_pins_what_the_airflow_environment_pins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["airflow"]
    assert {"apache-airflow", "apache-airflow-providers-apache-spark", "pyspark-client"} <= {
        r.split("==")[0] for r in extra
    }
    assert set(extra) <= _requirements(), set(extra) - _requirements()
    # pyspark-client writes the same files as the project's pyspark: one release for both
    pyspark = next(d for d in project["dependencies"] if d.startswith("pyspark=="))
    assert pyspark.split("==")[1] == next(r for r in extra if r.startswith("pyspark-client==")).split("==")[1]
