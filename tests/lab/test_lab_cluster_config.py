"""The lab cluster's shared log configuration is never seen half written by a node's JVM starting beside another
node's: it is replaced whole (a new file renamed over the old), or left alone when unchanged. A port taken before a
cluster's first start gets it new ports, not a failed fixture and JVMs left running."""

from __future__ import annotations

import socket
from pathlib import Path

from ..ports import free_port
from .cluster import KafkaCluster, lab_jvms


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


def test_a_port_taken_before_the_first_start_gets_the_cluster_new_ports_and_no_jvm_is_left(tmp_path):
    cluster = KafkaCluster("4.4.0", tmp_path / "kafka", brokers=1)
    broker = cluster.nodes[1]
    taken = broker.port
    with socket.socket() as squatter:  # another process bound the broker's port between the pick and the start
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            cluster.start()
            assert broker.port != taken and broker.running
            text = broker.log_file.read_text()
            assert "Address already in use" in text and "===== lab: start #2 " in text
            socket.create_connection(("127.0.0.1", broker.port), timeout=5).close()  # it serves on its new port
        finally:
            cluster.kill_all()
    assert lab_jvms(tmp_path) == []


def test_the_lab_picks_ports_below_the_ephemeral_range_and_never_twice():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= p < low for p in ports)
