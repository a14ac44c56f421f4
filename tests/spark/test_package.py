"""``kafka-offset-audit package``'s trimming of the executors' environment (:func:`audit.package.trim_env`).

The packed environment itself, built by the README's block, runs the audit on a standalone cluster and through
Spark Connect (``tests/spark/test_spark_standalone.py``, ``tests/spark/test_spark_connect.py``).
"""

from __future__ import annotations

from pathlib import Path

from audit.package import DRIVER_ONLY, executor_requirements, trim_env


def _tree(root: Path, files: list[str]) -> None:
    for f in files:
        p = root / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")


KEPT = [
    "pandas/__init__.py",
    "pandas/core/frame.py",
    "pandas/_testing/__init__.py",
    "numpy/__init__.py",
    "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
    "numpy/testing/__init__.py",
    "numpy.libs/libscipy_openblas64_-32a4b2a6.so",
    "pyarrow/__init__.py",
    "pyarrow/flight.py",
    "pyarrow/fs.py",
    "pyarrow/lib.cpython-311-x86_64-linux-gnu.so",
    "pyarrow/libarrow.so.2600",
    "pyarrow/libarrow_python.so.2600",
    "pyarrow/libparquet.so.2600",
    "pyarrow/_fs.cpython-311-x86_64-linux-gnu.so",
    "zstandard/__init__.py",
    "zstandard/backend_c.cpython-311-x86_64-linux-gnu.so",
    "kafka/__init__.py",
    "pydantic-2.14.4.dist-info/METADATA",
]
REMOVED = [
    "pip/__init__.py",
    "pip-25.0.dist-info/METADATA",
    "setuptools/__init__.py",
    "pkg_resources/__init__.py",
    "_distutils_hack/__init__.py",
    "distutils-precedence.pth",
    "pandas/tests/frame/test_api.py",
    "numpy/_core/tests/test_umath.py",
    "numpy/_core/include/numpy/ndarrayobject.h",
    "pyarrow/tests/test_array.py",
    "pyarrow/include/arrow/api.h",
    "pyarrow/lib.pyx",
    "pyarrow/libarrow_flight.so.2600",
    "pyarrow/libarrow_python_flight.so.2600.1.0",
    "pyarrow/_flight.cpython-311-x86_64-linux-gnu.so",
    "pyarrow/libarrow_s3.so.2600",
    "pyarrow/_s3fs.cpython-311-x86_64-linux-gnu.so",
    "pyarrow/_pyarrow_cpp_tests.cpython-311-x86_64-linux-gnu.so",
    "zstandard/_cffi.cpython-311-x86_64-linux-gnu.so",
]


def test_trim_env_removes_what_no_executor_imports_and_keeps_the_rest(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    _tree(site, KEPT + REMOVED)
    removed = trim_env(str(tmp_path / "env"))
    left = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert left == sorted(KEPT)
    # each removed directory or file is named once, relative to site-packages
    assert {"pip", "pandas/tests", "numpy/_core/tests", "pyarrow/libarrow_s3.so.2600"} <= set(removed)
    assert trim_env(str(tmp_path / "env")) == []  # rerunnable


def test_executor_requirements_leave_out_the_driver_only_dependencies():
    names = {r.split("==")[0].lower() for r in executor_requirements()}
    assert {"pyarrow", "pandas", "numpy", "kafka-python", "crc32c", "zstandard"} <= names
    assert not names & DRIVER_ONLY
