"""``kafka-offset-audit package``: the Python environment a Spark cluster's executors need, as one archive.

Follows PySpark's packaging guide ("Python Package Management", Using Virtualenv): a virtual environment packed
with ``venv-pack`` and shipped with ``spark-submit --archives env.tar.gz#env`` and ``PYSPARK_PYTHON=./env/bin/python``,
so executors whose Python has nothing installed can run the audit's tasks.

The environment holds the dependencies the audit's executor-side code imports (record-batch decoding, the codecs,
CRC-32C, Arrow, the live read's kafka-python), pinned to the versions installed here, so the executors' pyarrow
and numpy are the driver's.  It leaves out what Spark ships to every Python worker itself (pyspark, py4j) and
what only the driver uses (Great Expectations, matplotlib, the Prometheus client, the report's static assets);
the ``audit`` package itself is shipped by the application (:func:`audit.submit.ship_package`).  Before packing,
:func:`trim_env` removes what no executor imports (:data:`NOT_IMPORTED`: pip and setuptools, the libraries' test
suites and C headers, Arrow Flight and Arrow's S3 filesystem, loaded only by ``pyarrow.flight`` and
``pyarrow.fs.S3FileSystem``): the archive is uploaded, fetched and unpacked once per Spark application or Spark
Connect session, and that time grows with its size.  The packed
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
    "NOT_IMPORTED",
    "PackageError",
    "build_executor_env",
    "executor_requirements",
    "package_zip",
    "trim_env",
]

DIST = "kafka-offset-audit"
#: dependencies the executors do not need: Spark ships pyspark (and py4j) to its Python workers; the rest is
#: the driver's (reports, metrics, packing)
DRIVER_ONLY = {
    "pyspark",
    "great-expectations",
    "matplotlib",
    "prometheus-client",
    "jinja2",
    "venv-pack",
    "xstatic-jquery",
    "xstatic-bootstrap",
    "xstatic-font-awesome",
}

#: glob patterns, relative to the environment's ``site-packages``, of what no executor imports: the installers
#: (and setuptools' ``.pth`` hook), the test suites and C/Cython sources of pandas, numpy and pyarrow, and the
#: pyarrow extensions the audit never loads (Arrow Flight, the S3/GCS/Azure/HDFS filesystems, Arrow's C++ tests),
#: and zstandard's CFFI backend (CPython loads its C backend).
#: Each is imported lazily by its own library, so the rest imports without it.
NOT_IMPORTED = (
    "pip",
    "pip-*.dist-info",
    "setuptools",
    "setuptools-*.dist-info",
    "pkg_resources",
    "_distutils_hack",
    "distutils-precedence.pth",
    "wheel",
    "wheel-*.dist-info",
    "pandas/tests",
    "numpy/*/tests",
    "numpy/tests",
    "numpy/_core/include",
    "numpy/distutils",
    "pyarrow/tests",
    "pyarrow/include",
    "pyarrow/src",
    "pyarrow/*.pyx",
    "pyarrow/*.pxd",
    "pyarrow/*.pxi",
    "pyarrow/includes",
    "pyarrow/libarrow_flight.so*",
    "pyarrow/libarrow_python_flight.so*",
    "pyarrow/_flight.*",
    "pyarrow/libarrow_s3.so*",
    "pyarrow/_s3fs.*",
    "pyarrow/_gcsfs.*",
    "pyarrow/_azurefs.*",
    "pyarrow/_hdfs.*",
    "pyarrow/_pyarrow_cpp_tests.*",
    "zstandard/_cffi.*",
    "zstandard/backend_cffi.py",
)


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
        trim_env(env)
        _run(
            [os.path.join(env, "bin", "python"), "-c", _IMPORT_CHECK],
            "importing the executors' dependencies from the trimmed environment",
        )
        tmp_out = output + ".part"
        try:
            venv_pack.pack(prefix=env, output=tmp_out, format="tar.gz", force=True, verbose=not quiet)
        except Exception as exc:  # noqa: BLE001 - venv-pack's own errors
            raise PackageError(f"venv-pack failed: {exc}") from None
        os.replace(tmp_out, output)
        return output
    finally:
        shutil.rmtree(work, ignore_errors=True)


#: what an executor of the audit imports (the decoders, the codecs, the live read), checked in the packed
#: environment after :func:`trim_env`
_IMPORT_CHECK = (
    "import pyarrow, pyarrow.compute, pyarrow.fs, pyarrow.dataset, pyarrow.parquet, pandas, numpy, "
    "crc32c, cramjam, lz4.frame, zstandard, snappy, xxhash, kafka, pydantic"
)


def trim_env(env: str) -> list[str]:
    """Remove :data:`NOT_IMPORTED` from the virtual environment at ``env``.

    Returns
    -------
    list of str
        The removed paths, relative to ``site-packages``.
    """
    import glob

    removed = []
    for site in glob.glob(os.path.join(env, "lib", "python*", "site-packages")):
        for pattern in NOT_IMPORTED:
            for path in sorted(glob.glob(os.path.join(site, pattern))):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
                removed.append(os.path.relpath(path, site))
    return removed


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
