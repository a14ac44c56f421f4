"""Run Spark for the audit: the session, the driver JVM's options, tuning for an input's size, and concurrent jobs.

Spark for the audit: the session (embedded, spark-submit, Spark Connect), the driver JVM's options, how
queries are tuned for an input's size, running several jobs at once or several queries in one job, and keeping a
table that later queries read more than once (checkpointed by the first job that reads it).

The names below are the package's interface; its modules are :mod:`.jvm`, :mod:`.session`, :mod:`.tuning` and
:mod:`.actions`.
"""

from __future__ import annotations

from .actions import checkpoint_on_first_use, collect_together, in_parallel, inheriting
from .jvm import (
    METASPACE_JAVA_OPTION,
    QUICK_START_JAVA_OPTIONS,
    SMALL_MACHINE_CPUS,
    SMALL_MACHINE_JAVA_OPTIONS,
    ClassDataArchive,
    ResolvedPackages,
    available_cpus,
    driver_java_options,
    heap_java_options,
    pid_alive,
    quick_start_java_options,
    single_jvm_master,
)
from .session import (
    CACHE_IN_SESSION_CONF,
    CONNECT_SESSION_CONF,
    DATAFRAME_DEBUGGING_CONF,
    WORKER_SITE,
    ConnectError,
    build_remote_session,
    build_session,
    is_connect,
    release_remote_session,
)
from .tuning import (
    SMALL_INPUT_BYTES,
    SMALL_INPUT_CONF,
    SMALL_TABLE_ROWS,
    broadcast_unless_small,
    compact,
    default_parallelism,
    distribute,
    small_settings,
    small_tables,
    tuned_for_input,
)

__all__ = [
    "CACHE_IN_SESSION_CONF",
    "CONNECT_SESSION_CONF",
    "DATAFRAME_DEBUGGING_CONF",
    "METASPACE_JAVA_OPTION",
    "QUICK_START_JAVA_OPTIONS",
    "SMALL_INPUT_BYTES",
    "SMALL_INPUT_CONF",
    "SMALL_MACHINE_CPUS",
    "SMALL_MACHINE_JAVA_OPTIONS",
    "SMALL_TABLE_ROWS",
    "WORKER_SITE",
    "ClassDataArchive",
    "ConnectError",
    "ResolvedPackages",
    "available_cpus",
    "build_remote_session",
    "build_session",
    "checkpoint_on_first_use",
    "collect_together",
    "broadcast_unless_small",
    "compact",
    "default_parallelism",
    "distribute",
    "driver_java_options",
    "heap_java_options",
    "in_parallel",
    "inheriting",
    "is_connect",
    "pid_alive",
    "quick_start_java_options",
    "release_remote_session",
    "single_jvm_master",
    "small_settings",
    "small_tables",
    "tuned_for_input",
]
