#!/usr/bin/env bash
# Build (or refresh) the Airflow environment for airflow_dags/ and tests/airflow/test_airflow_dag.py.
#
#   bash scripts/airflow_env.sh          # -> .venv-airflow/ beside this script's checkout
#
# requirements-airflow.txt pins what pyproject.toml's [airflow] extra names (audit.airflow's dependencies) and the
# project's other runtime dependencies. The script installs that file rather than `.[airflow]`, then the project
# with --no-deps, so that pyspark and pyspark-client are exactly the pinned release.
#
# Airflow lives in its own venv because apache-airflow-providers-apache-spark pulls pyspark-client,
# which overwrites pyspark's Python files (see requirements-airflow.txt), and Airflow's dependencies must
# not move the audit's. Here pyspark and pyspark-client are both pinned to 4.2.0 and the project is
# installed without its dependencies, as a deployment installs it: a regular (non-editable) install of
# this checkout, so the DAG submits the application inside the installed package (audit/submit.py).
#
# Idempotent: when the venv exists and requirements-airflow.txt and pyproject.toml are unchanged since
# the last successful run (a stamp in the venv), it only reinstalls the project (its code may have
# changed), checks the venv and exits.
#
# Environment: KOA_AIRFLOW_VENV (default <repo>/.venv-airflow), KOA_AIRFLOW_PYTHON (default the first
# of python3.11, python3.12, python3 that is 3.11 or 3.12).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${KOA_AIRFLOW_VENV:-$REPO/.venv-airflow}"
REQ="$REPO/requirements-airflow.txt"
STAMP="$VENV/.koa-airflow-env.stamp"

pick_python() {
  if [ -n "${KOA_AIRFLOW_PYTHON:-}" ]; then echo "$KOA_AIRFLOW_PYTHON"; return; fi
  for p in python3.11 python3.12 python3; do
    if command -v "$p" >/dev/null 2>&1 &&
       "$p" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else 1)' 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "airflow_env.sh: need Python 3.11 or 3.12 (set KOA_AIRFLOW_PYTHON)" >&2
  exit 2
}

want_stamp="$(cat "$REQ" "$REPO/pyproject.toml" | sha256sum | cut -d' ' -f1)"

check() {
  # from / : the check must import the installed package, not this checkout's audit/
  (cd / && "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import os
import sys
v = {p: md.version(p) for p in ("apache-airflow", "apache-airflow-providers-apache-spark", "pyspark",
                                "pyspark-client", "great-expectations", "kafka-offset-audit")}
if v["pyspark"] != v["pyspark-client"]:
    sys.exit(f"pyspark {v['pyspark']} and pyspark-client {v['pyspark-client']} differ: rerun scripts/airflow_env.sh")
import pyspark
if pyspark.__version__ != v["pyspark"]:
    sys.exit(f"pyspark's Python files are {pyspark.__version__}, its wheel {v['pyspark']}: rerun scripts/airflow_env.sh")
import airflow.providers.apache.spark.operators.spark_submit  # noqa: F401
import audit.pipeline  # noqa: F401
import audit.airflow  # noqa: F401 - build_dag, the operator and the notifier (the [airflow] extra's module)
import audit.submit
import sysconfig
if not os.path.realpath(audit.__file__).startswith(os.path.realpath(sysconfig.get_paths()["purelib"]) + os.sep):
    sys.exit(f"audit is imported from {audit.__file__}, not installed in the venv: rerun scripts/airflow_env.sh")
if not os.path.isfile(os.path.join(os.path.dirname(audit.__file__), "sql", "finding_log_truncation.sql")):
    sys.exit("the installed audit package has no sql/: rerun scripts/airflow_env.sh")
print("airflow env ok: " + ", ".join(f"{k} {x}" for k, x in v.items()) + f"; application {audit.submit.__file__}")
EOF
  )
}

install_project() {
  # a regular install (a wheel built from this checkout), not -e: what a deployment has
  "$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$REPO"
}

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ]; then
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  install_project && check && exit 0
  echo "airflow_env.sh: $VENV is broken; reinstalling" >&2
fi

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  PY="$(pick_python)"
  echo "airflow_env.sh: creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
rm -f "$STAMP"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$VENV/bin/python" -m pip install -q --upgrade pip
# pyspark and pyspark-client are pinned to one release in $REQ, so whichever pip writes last leaves
# identical Python files; the project goes in without its dependencies.
"$VENV/bin/python" -m pip install -q -r "$REQ"
install_project
check
echo "$want_stamp" > "$STAMP"
echo "airflow_env.sh: $VENV ready in $(( $(date +%s) - start ))s"
