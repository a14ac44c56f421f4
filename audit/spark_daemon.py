"""Spark's Python worker daemon (``pyspark.daemon``), importing pyspark from its installed copy.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j source zip at the front of its Python
workers' ``PYTHONPATH`` (``PythonUtils.sparkPythonPath``).  Python cannot cache bytecode for modules
imported from a zip, so every daemon, and every worker it forks (which imports ``pyspark.worker`` after the
fork), compiles pyspark's modules from source again: about 0.4 s of CPU each, on the critical path of the
first Python task of every audit.  With pip's pyspark the same files are installed beside the zip, with
their bytecode cached.

Run as ``python -m audit.spark_daemon <worker module>`` (``spark.python.daemon.module``, set by
:func:`audit.spark.build_session` for local masters): a zip on ``sys.path`` whose package (``pyspark``,
``py4j``) is installed elsewhere on the path in the same version moves to the end of ``sys.path``; then
``pyspark.daemon.manager()`` runs as ``python -m pyspark.daemon`` would.  A zip whose package is not
installed, or installed in another version, stays first, so nothing changes where pyspark comes only from
the zip.
"""
from __future__ import annotations

import importlib.machinery
import os
import re
import sys
import zipfile

#: (package, the file that holds its version, the pattern that reads it)
_PACKAGES = (("pyspark", "version.py", r"__version__[^=]*=\s*['\"]([^'\"]+)"),
             ("py4j", "version.py", r"__version__\s*=\s*['\"]([^'\"]+)"))


def _version(text: str, pattern: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _zip_version(path: str, package: str, file: str, pattern: str) -> str | None:
    try:
        with zipfile.ZipFile(path) as z:
            return _version(z.read(f"{package}/{file}").decode("utf-8", "replace"), pattern)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _installed_version(package: str, file: str, pattern: str, path: list[str]) -> str | None:
    spec = importlib.machinery.PathFinder.find_spec(package, path)
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        with open(os.path.join(list(spec.submodule_search_locations)[0], file), encoding="utf-8") as fh:
            return _version(fh.read(), pattern)
    except OSError:
        return None


def prefer_installed(path: list[str]) -> list[str]:
    """``path`` (a ``sys.path``) with each zip entry that holds a package of :data:`_PACKAGES` moved to
    the end when the same version of that package is importable from the other entries.  Never raises."""
    zips = [p for p in path if p.endswith(".zip")]
    moved = []
    for z in zips:
        for package, file, pattern in _PACKAGES:
            zv = _zip_version(z, package, file, pattern)
            if zv is None:
                continue
            rest = [p for p in path if p not in zips]
            if _installed_version(package, file, pattern, rest) == zv:
                moved.append(z)
            break
    return [p for p in path if p not in moved] + moved


def main() -> None:
    sys.path[:] = prefer_installed(sys.path)
    from pyspark import daemon
    daemon.manager()


if __name__ == "__main__":
    main()
