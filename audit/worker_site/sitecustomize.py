"""Start-up hook of the Python processes Spark starts for a session the audit launches (not a module to import).

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j source zip at the front of every Python
process it starts (``PythonUtils.sparkPythonPath``): the worker daemon and the workers it forks, and, for a
Python data source, the three planner processes the driver runs one after another
(``pyspark.sql.worker.lookup_data_sources``, ``create_data_source``, ``plan_data_source_read``, each through
``pyspark.daemon``: Spark 4's ``PythonPlannerRunner`` ignores ``spark.python.daemon.module``).  Python cannot
cache bytecode for modules imported from a zip, so each of those processes compiles pyspark's modules from
source again: 0.4-0.7 s of CPU each, on the critical path of the first Python task and of a live audit's read.
With pip's pyspark the same files are installed beside the zip, with their bytecode cached.

:func:`audit.spark.build_session` starts the driver JVM with this directory on ``PYTHONPATH``; Spark appends
the JVM's own ``PYTHONPATH`` to every Python process it starts, and Python's ``site`` imports the first
``sitecustomize`` on the path at start-up, before ``-m`` is resolved.  Then a zip on ``sys.path`` whose package
(``pyspark``, ``py4j``) is installed elsewhere on the path in the same version moves to the end of
``sys.path``.  A zip whose package is not installed, or installed in another version, stays first, so nothing
changes where pyspark comes only from the zip.  The next ``sitecustomize`` on the path (a distribution's, a
user's) then runs as it would have.  Standard library only; its own work never raises.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
import zipimport

#: (package, the file that holds its version, the pattern that reads it)
_PACKAGES = (
    ("pyspark", "version.py", r"__version__[^=]*=\s*['\"]([^'\"]+)"),
    ("py4j", "version.py", r"__version__\s*=\s*['\"]([^'\"]+)"),
)


def _version(text: str, pattern: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _zip_version(path: str, package: str, file: str, pattern: str) -> str | None:
    try:
        data = zipimport.zipimporter(path).get_data(f"{package}/{file}")
    except (OSError, zipimport.ZipImportError):
        return None
    return _version(data.decode("utf-8", "replace"), pattern)


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
    """Return ``path`` (a ``sys.path``) with zip entries of :data:`_PACKAGES` moved after the installed copies.

    Each zip entry that holds a package of :data:`_PACKAGES` is moved to the end when the same version of that
    package is importable from the other entries.  Never raises.
    """
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


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (the one this file shadows), as ``site`` would have."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    from importlib.util import module_from_spec

    module = module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":
    try:
        sys.path[:] = prefer_installed(sys.path)
    except Exception:  # noqa: BLE001 - a start-up hook must never stop the process
        pass
    _chain()
