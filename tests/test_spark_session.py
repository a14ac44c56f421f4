"""When the embedded driver JVM gets the quick-start JIT options (no JVM is started here)."""
from audit.spark import QUICK_START_JAVA_OPTIONS, driver_java_options


def test_latest_mode_local_driver_gets_quick_start(monkeypatch):
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    assert driver_java_options("local[2]", quick_start=True, launching=True) == QUICK_START_JAVA_OPTIONS
    assert driver_java_options("local-cluster[2,1,1024]", quick_start=True, launching=True) == QUICK_START_JAVA_OPTIONS


def test_history_mode_cluster_or_running_jvm_keep_the_defaults(monkeypatch):
    monkeypatch.delenv("KOA_DRIVER_JAVA_OPTIONS", raising=False)
    assert driver_java_options("local[2]", quick_start=False, launching=True) is None
    assert driver_java_options("spark://host:7077", quick_start=True, launching=True) is None
    assert driver_java_options("local[2]", quick_start=True, launching=False) is None  # spark-submit / reused session


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("KOA_DRIVER_JAVA_OPTIONS", "")
    assert driver_java_options("local[2]", quick_start=True, launching=True) is None
    monkeypatch.setenv("KOA_DRIVER_JAVA_OPTIONS", "-Xss4m")
    assert driver_java_options("local[2]", quick_start=False, launching=True) == "-Xss4m"
