"""The live audit on a secured real cluster: TLS + SASL/PLAIN listener, StandardAuthorizer, minimal ACLs.

For each lab Kafka version a KRaft cluster is started whose brokers have a second listener, ``SASL_SSL``
(certificate made here with the JDK's ``keytool``), and ``StandardAuthorizer`` with ``kafka.authorizer.logger``
at DEBUG, so every authorisation decision -- allowed or denied -- is in the broker logs. Setup (topics,
records, a consumer group's commits, ACLs) goes through Kafka's Java clients on the PLAINTEXT listener,
whose ``User:ANONYMOUS`` is a super user. The audit connects as ``User:audit`` over SASL_SSL with only the
grants the README lists, and the broker's own authorizer log is the proof that it only reads.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from . import kafka_dist
from .client import LabClient
from .cluster import KafkaCluster

SECRET = "audit-pw-7f3c9e1d"
STORE_PASS = "lab-store-pass"
TOPICS = ["payments", "orders"]
GROUP = "payments-app"
#: the README's minimal grants for the audit's principal
MINIMAL_ACLS = [{"resource_type": "TOPIC", "name": t, "operation": "DESCRIBE"} for t in TOPICS] + [
    {"resource_type": "TOPIC", "name": "__consumer_offsets", "operation": "DESCRIBE"},
    {"resource_type": "TOPIC", "name": "__consumer_offsets", "operation": "READ"},
]
WRITE_SIDE = {
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CLUSTER_ACTION",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
    "TWO_PHASE_COMMIT",
}


def _keytool() -> str:
    return str(Path(kafka_dist.java()).with_name("keytool"))


def _make_certificate(d: Path) -> tuple[Path, Path]:
    """A self-signed broker certificate for 127.0.0.1 (PKCS12 keystore) and its PEM (the clients' trust store)."""
    store, pem = d / "broker.p12", d / "ca.pem"
    subprocess.run(
        [
            _keytool(),
            "-genkeypair",
            "-alias",
            "broker",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            "-validity",
            "2",
            "-dname",
            "CN=localhost",
            "-ext",
            "SAN=IP:127.0.0.1,DNS:localhost",
            "-keystore",
            str(store),
            "-storetype",
            "PKCS12",
            "-storepass",
            STORE_PASS,
            "-keypass",
            STORE_PASS,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            _keytool(),
            "-exportcert",
            "-rfc",
            "-alias",
            "broker",
            "-keystore",
            str(store),
            "-storepass",
            STORE_PASS,
            "-file",
            str(pem),
        ],
        check=True,
        capture_output=True,
    )
    return store, pem


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(0), ids=lambda v: f"kafka-{v}")
def secured(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"secured-{version}")
    store, pem = _make_certificate(work)
    authz = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
    }
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_admin="admin-secret" user_audit="{SECRET}";'
    )
    broker = {
        **authz,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.ssl.keystore.location": str(store),
        "listener.name.sasl_ssl.ssl.keystore.password": STORE_PASS,
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.key.password": STORE_PASS,
    }
    cluster = KafkaCluster(
        version,
        work / "cluster",
        brokers=3,
        extra_listener="SASL_SSL",
        overrides={"broker": broker, "controller": authz},
        loggers={"kafka.authorizer.logger": "DEBUG"},
    ).start()
    lab = LabClient(version, cluster.bootstrap, log=work / "labclient.log")
    try:
        for t in TOPICS:
            lab.call("create_topic", topic=t, partitions=3, rf=3)
            for p in range(3):
                lab.call("produce", topic=t, partition=p, count=20, acks="all")
        lab.call("consume_commit", group=GROUP, topics=TOPICS)
        lab.call("create_acls", principal="User:audit", acls=MINIMAL_ACLS)
        props = work / "client.properties"
        props.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="audit" password="{SECRET}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={pem}\n"
        )
        yield {
            "cluster": cluster,
            "lab": lab,
            "props": props,
            "work": work,
            "version": version,
            "bootstrap": cluster.bootstrap_for("SASL_SSL"),
        }
    finally:
        lab.close()
        cluster.stop()


def _audit(secured, out: Path, props: Path | None = None, capfd=None) -> tuple[int, str]:
    from audit.cli import main

    code = main(
        [
            "audit",
            "--bootstrap-servers",
            secured["bootstrap"],
            "--client-config",
            str(props or secured["props"]),
            "--output",
            str(out),
            "--skip-reports",
            "--fail-on",
            "never",
        ]
    )
    text = ""
    if capfd is not None:
        o, e = capfd.readouterr()
        text = o + e
    return code, text


_AUTHZ = re.compile(
    r"Principal = User:audit is (Allowed|Denied) [Oo]peration = (\w+) from host = \S+ "
    r"on resource = (\w+):(?:LITERAL:|PREFIXED:)?([^ ]+)(?: for request = (\w+))?"
)


def _decisions(cluster: KafkaCluster) -> list[tuple[str, str, str, str, str]]:
    """(Allowed/Denied, operation, resource type, resource name, request) of User:audit, from every broker's log."""
    out = []
    for n in cluster.broker_nodes():
        out += [m.groups() for m in _AUTHZ.finditer(n.log_file.read_text(errors="replace"))]
    return out


def test_minimal_acls_audit_and_the_broker_saw_only_reads(secured, tmp_path, capfd):
    capfd.readouterr()
    before = len(_decisions(secured["cluster"]))
    code, text = _audit(secured, tmp_path / "out", capfd=capfd)
    assert code in (0, 1), text[-4000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["offset_commits"]["group_partitions"] == 6  # GROUP on 2 topics x 3 partitions
    import pyarrow.parquet as pq

    committed = pq.read_table(str(tmp_path / "out" / "committed_offsets")).to_pylist()
    assert {(r["group_id"], r["topic"]) for r in committed} == {(GROUP, t) for t in TOPICS}
    assert all(r["verdict"] == "OK" and r["committed_offset"] == 20 for r in committed), committed

    decisions = _decisions(secured["cluster"])[before:]
    assert decisions, "the authorizer logged nothing for User:audit: is kafka.authorizer.logger at DEBUG?"
    assert [d for d in decisions if d[0] == "Denied"] == []
    ops = {(d[1].upper(), d[2], d[4] if d[4] else "") for d in decisions}
    print(f"Kafka {secured['version']}: User:audit's authorised operations: {sorted(ops)}")
    assert not [o for o in ops if o[0] in WRITE_SIDE], ops
    assert not [d for d in decisions if d[2] == "Group"], "the audit touched a consumer group"
    reads = {(d[2], d[3]) for d in decisions if d[1].upper() == "READ"}
    assert reads == {("Topic", "__consumer_offsets")}, reads
    # the requests it made: metadata, offsets, epochs and the __consumer_offsets fetch, nothing else
    assert {d[4] for d in decisions if d[4]} <= {"Metadata", "ListOffsets", "OffsetForLeaderEpoch", "Fetch"}, decisions

    # no secret anywhere: console, summary, any output file
    assert SECRET not in text
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


@pytest.mark.parametrize(
    "missing",
    [
        {"resource_type": "TOPIC", "name": "__consumer_offsets", "operation": "READ"},
        {"resource_type": "TOPIC", "name": "payments", "operation": "DESCRIBE"},
    ],
    ids=["read-consumer-offsets", "describe-topic"],
)
def test_a_missing_grant_exits_2_naming_it(secured, tmp_path, capfd, missing):
    lab = secured["lab"]
    lab.call("delete_acls", principal="User:audit", acls=[missing])
    try:
        capfd.readouterr()
        code, text = _audit(secured, tmp_path / "out", capfd=capfd)
    finally:
        lab.call("create_acls", principal="User:audit", acls=[missing])
    assert code == 2, text[-4000:]
    err = [ln for ln in text.splitlines() if ln.startswith("kafka-offset-audit: error:")]
    assert err, text[-4000:]
    print(err[0])
    assert missing["operation"] in err[0] and missing["name"] in err[0], err[0]
    assert SECRET not in text
    assert not (tmp_path / "out").exists()


def test_a_wrong_password_exits_2_naming_the_authentication_failure(secured, tmp_path, capfd):
    wrong = "not-the-" + SECRET
    props = tmp_path / "wrong.properties"
    props.write_text(secured["props"].read_text().replace(SECRET, wrong))
    capfd.readouterr()
    code, text = _audit(secured, tmp_path / "out", props=props, capfd=capfd)
    assert code == 2, text[-4000:]
    err = [ln for ln in text.splitlines() if ln.startswith("kafka-offset-audit: error:")]
    assert err and re.search(r"authenticat", err[0], re.I), text[-3000:]
    print(err[0])
    assert wrong not in text and SECRET not in text
