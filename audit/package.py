"""``kafka-offset-audit package``: the Python environment a Spark cluster's executors need, as one archive.

Follows PySpark's packaging guide ("Python Package Management", Using Virtualenv): a virtual environment packed
with ``venv-pack`` and shipped with ``spark-submit --archives env.tar.gz#env`` and ``PYSPARK_PYTHON=./env/bin/python``,
so executors whose Python has nothing installed can run the audit's tasks.

The environment holds the dependencies the audit's executor-side code imports (record-batch decoding, the codecs,
CRC-32C, Arrow, the live read's kafka-python), pinned to the versions installed here, so the executors' pyarrow
and numpy are the driver's.  It leaves out what Spark ships to every Python worker itself (pyspark, py4j) and
what only the driver uses (Great Expectations, matplotlib, the Prometheus client, the report's static assets);
the ``audit`` package itself is shipped by the application (:func:`audit.submit.ship_package`).  The packed
``bin/python`` links to this machine's base interpreter (``venv-pack``'s way): the executors need the same Python
at the same path, as PySpark's guide says; otherwise use conda-pack.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tempfile


__all__ = [
    "DIST",
    "DRIVER_ONLY",
    "PackageError",
    "build_executor_env",
    "executor_requirements",
    "package_zip",
]

DIST = "kafka-offset-audit"
#: dependencies the executors do not need: Spark ships pyspark (and py4j) to its Python workers; the rest is
#: the driver's (reports, metrics)
DRIVER_ONLY = {
    "pyspark",
    "great-expectations",
    "matplotlib",
    "prometheus-client",
    "xstatic-jquery",
    "xstatic-bootstrap",
    "xstatic-font-awesome",
}


class PackageError(RuntimeError):
    """The environment could not be built or packed (the message says what failed)."""


def executor_requirements() -> list[str]:
    """``name==version`` of each runtime dependency the executors need, at the version installed here.

    Raises :class:`PackageError` when the project or one of those dependencies is not installed.
    """
    try:
        reqs = md.requires(DIST) or []
    except md.PackageNotFoundError:
        raise PackageError(f"{DIST} is not installed in this Python ({sys.executable})") from None
    out = []
    for req in reqs:
        if ";" in req:  # extras (test, fuzz)
            continue
        match = re.match(r"[A-Za-z0-9._-]+", req)
        if match is None:
            continue
        name = match.group(0)
        if name.lower() in DRIVER_ONLY:
            continue
        try:
            out.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            raise PackageError(f"{name} (a dependency of {DIST}) is not installed here") from None
    return out


def build_executor_env(output: str, python: str | None = None, quiet: bool = True) -> str:
    """Build a virtual environment with :func:`executor_requirements` and pack it into ``output`` (``.tar.gz``).

    The environment is packed with ``venv-pack``.  Uses ``pip`` (PyPI, or the index pip is set up for) in a
    temporary directory.

    Returns
    -------
    str
        ``output``'s absolute path.

    Raises
    ------
    PackageError
        Names the step that failed.
    """
    import venv_pack

    output = os.path.abspath(output)
    if not output.endswith((".tar.gz", ".tgz")):
        raise PackageError(f"--output {output}: give a .tar.gz path (spark-submit --archives env.tar.gz#env)")
    work = tempfile.mkdtemp(prefix="koa-package-")
    try:
        env = os.path.join(work, "env")
        base = python or getattr(sys, "_base_executable", None) or sys.executable
        _run([base, "-m", "venv", env], "creating the virtual environment")
        pip = [os.path.join(env, "bin", "python"), "-m", "pip", "install", "--disable-pip-version-check"]
        _run(pip + (["-q"] if quiet else []) + executor_requirements(), "installing the executors' dependencies")
        tmp_out = output + ".part"
        try:
            venv_pack.pack(prefix=env, output=tmp_out, format="tar.gz", force=True, verbose=not quiet)
        except Exception as exc:  # noqa: BLE001 - venv-pack's own errors
            raise PackageError(f"venv-pack failed: {exc}") from None
        os.replace(tmp_out, output)
        return output
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PackageError(f"{what} failed ({' '.join(cmd[:4])} ...): {(proc.stderr or proc.stdout)[-2000:]}")


def package_zip() -> str:
    """Zip the ``audit`` package as this process imports it, for ``addPyFile`` or a Spark Connect ``pyfile``.

    Its SQL is included, from the checkout's ``sql/`` when it runs from one; the demo data is left out.  The zip is
    an ``addPyFile`` file or a Spark Connect ``pyfile`` artifact.

    Returns
    -------
    str
        The zip's path, in a temporary directory removed when this process exits.
    """
    import atexit

    import audit
    from audit.queries import sql_dir

    pkg_dir = os.path.dirname(os.path.abspath(audit.__file__))
    tmp = tempfile.mkdtemp(prefix="koa-pyfiles-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    stage = os.path.join(tmp, "stage")
    shutil.copytree(pkg_dir, os.path.join(stage, "audit"), ignore=shutil.ignore_patterns("demo_data", "__pycache__"))
    if not os.path.isdir(os.path.join(stage, "audit", "sql")):  # a checkout: sql/ is beside audit/
        shutil.copytree(
            str(sql_dir()), os.path.join(stage, "audit", "sql"), ignore=shutil.ignore_patterns("__pycache__")
        )
    archive = shutil.make_archive(os.path.join(tmp, "audit_pkg"), "zip", stage)
    shutil.rmtree(stage)
    return archive
