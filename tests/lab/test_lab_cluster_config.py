"""The lab cluster's shared log configuration is never seen half written by a node's JVM starting beside another
node's: it is replaced whole (a new file renamed over the old), or left alone when unchanged."""

from __future__ import annotations

from .cluster import KafkaCluster


def test_the_shared_log_config_is_replaced_whole_never_rewritten_in_place(tmp_path):
    cluster = KafkaCluster("4.4.0", tmp_path / "kafka", brokers=2)
    nodes = list(cluster.nodes.values())
    cluster._write_config(nodes[0])
    path = tmp_path / "kafka" / "log4j2.xml"
    first = path.stat().st_ino
    with open(path) as reader:  # a JVM reading while the next node's config is written
        cluster._write_config(nodes[1])
        assert path.stat().st_ino == first  # unchanged: not touched at all
        cluster.loggers["kafka.request.logger"] = "DEBUG"
        cluster._write_config(nodes[1])
        assert reader.read().rstrip().endswith("</Configuration>")  # the reader's file stayed whole
    assert path.stat().st_ino != first  # changed: a new file, renamed over the old
    assert 'name="kafka.request.logger" level="DEBUG"' in path.read_text()
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
