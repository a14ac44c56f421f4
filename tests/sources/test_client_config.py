"""Tests for audit.sources.client_config: .properties parsing, kafka-python mapping, redaction."""

from __future__ import annotations

import logging

import pytest
from kafka import KafkaConsumer
from kafka.net.manager import KafkaConnectionManager

from audit.sources.client_config import (
    REDACTED,
    ClientConfig,
    ClientConfigError,
    RedactingFilter,
    is_secret_key,
    load_client_config,
    parse_client_properties,
    parse_properties,
    redact,
)

SECRET = "Sup3r-Secret-Pa55"
KEY_SECRET = "k3y-Pa55word"

SASL_SSL_PROPERTIES = f"""\
# auditor credentials
bootstrap.servers=broker-1.example:9093, broker-2.example:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="offset-auditor" \\
    password="{SECRET}";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.keystore.type=PEM
ssl.keystore.location=/etc/kafka/client.pem
ssl.key.password={KEY_SECRET}
ssl.endpoint.identification.algorithm=https
client.id=offset-audit
request.timeout.ms=15000
metadata.recovery.strategy=rebootstrap
metadata.recovery.rebootstrap.trigger.ms=120000
group.id=ignored-by-the-auditor
"""


def test_parse_properties_java_syntax():
    text = (
        "# comment\n"
        "! also a comment\n"
        "   a = 1\n"
        "b:2\n"
        "c 3\n"
        "d=x\\\n"
        "    y\\\n"
        "  z\n"
        "e=tab\\there\\u0041\n"
        "f\\=key=v\n"
        "empty=\n"
        "a=override\n"
    )
    assert parse_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "xyz",
        "e": "tab\thereA",
        "f=key": "v",
        "empty": "",
    }
    assert parse_properties("") == {}


def test_full_sasl_ssl_mapping(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(SASL_SSL_PROPERTIES)
    config = load_client_config(path)
    assert dict(config.settings) == {
        "bootstrap_servers": ["broker-1.example:9093", "broker-2.example:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "offset-auditor",
        "sasl_plain_password": SECRET,
        "ssl_cafile": "/etc/kafka/ca.pem",
        "ssl_certfile": "/etc/kafka/client.pem",
        "ssl_password": KEY_SECRET,
        "ssl_check_hostname": True,
        "client_id": "offset-audit",
        "request_timeout_ms": 15000,
    }
    assert config.metadata_recovery_strategy == "rebootstrap"
    assert config.metadata_recovery_rebootstrap_trigger_ms == 120000
    assert config.bootstrap_servers == ["broker-1.example:9093", "broker-2.example:9093"]
    assert ("group.id", "the auditor never joins a consumer group") in config.ignored
    assert config.source == str(path)


def test_kip1102_defaults_and_none():
    default = parse_client_properties({"bootstrap.servers": "a:9092"})
    assert default.metadata_recovery_strategy == "rebootstrap"
    assert default.metadata_recovery_rebootstrap_trigger_ms == 300000
    off = parse_client_properties({"metadata.recovery.strategy": "NONE"})
    assert off.metadata_recovery_strategy == "none"
    with pytest.raises(ClientConfigError, match="metadata.recovery.strategy"):
        parse_client_properties({"metadata.recovery.strategy": "sometimes"})


def test_kwargs_are_accepted_by_kafka_python():
    config = parse_client_properties(
        parse_properties(SASL_SSL_PROPERTIES + "fetch.max.bytes=1000\nsocket.connection.setup.timeout.ms=5000\n")
    )
    consumer_kw = config.consumer_kwargs()
    assert set(consumer_kw) <= set(KafkaConsumer.DEFAULT_CONFIG)
    assert consumer_kw["fetch_max_bytes"] == 1000
    assert "socket_connection_setup_timeout_ms" not in consumer_kw  # KafkaConsumer would reject it
    conn_kw = config.connection_kwargs()
    assert set(conn_kw) <= set(KafkaConnectionManager.DEFAULT_CONFIG) | {"retry_backoff_ms"}
    assert conn_kw["socket_connection_setup_timeout_ms"] == 5000
    assert conn_kw["sasl_plain_password"] == SECRET


def test_unknown_key_is_an_error_naming_it():
    with pytest.raises(ClientConfigError) as info:
        parse_client_properties({"bootstrap.servers": "a:1", "sasl.mechansim": "PLAIN"})
    assert "sasl.mechansim" in str(info.value)
    assert info.value.key == "sasl.mechansim"
    with pytest.raises(ClientConfigError, match="acks"):
        parse_client_properties({"acks": "all"})  # a producer setting


@pytest.mark.parametrize(
    "props, key",
    [
        ({"request.timeout.ms": "soon"}, "request.timeout.ms"),
        ({"request.timeout.ms": "0"}, "request.timeout.ms"),
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"sasl.mechanism": "MAGIC"}, "sasl.mechanism"),
        ({"ssl.truststore.location": "/etc/kafka/truststore.jks"}, "ssl.truststore.location"),
        ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/x/ts.jks"}, "ssl.truststore.type"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/x/ks.p12"}, "ssl.keystore.type"),
        ({"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"}, "ssl.truststore.certificates"),
        ({"check.crcs": "maybe"}, "check.crcs"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "ssl.endpoint.identification.algorithm"),
    ],
)
def test_bad_values_name_the_key(props, key):
    with pytest.raises(ClientConfigError) as info:
        parse_client_properties(props)
    assert key in str(info.value)
    assert info.value.key == key


def test_misc_mappings():
    config = parse_client_properties(
        {
            "security.protocol": "ssl",
            "ssl.truststore.location": "/x/ca.crt",
            "ssl.endpoint.identification.algorithm": "",
            "receive.buffer.bytes": "-1",
            "send.buffer.bytes": "131072",
            "ssl.keystore.location": "/x/me.pem",
            "ssl.keystore.password": "kspw-value",
            "client.dns.lookup": "use_all_dns_ips",
            "check.crcs": "false",
        }
    )
    s = config.settings
    assert s["security_protocol"] == "SSL" and s["ssl_cafile"] == "/x/ca.crt"
    assert s["ssl_check_hostname"] is False
    assert s["receive_buffer_bytes"] is None and s["send_buffer_bytes"] == 131072
    assert s["ssl_password"] == "kspw-value"  # PEM key password falls back to the keystore password
    assert s["check_crcs"] is False


def test_sasl_requirements():
    with pytest.raises(ClientConfigError, match="sasl.jaas.config"):
        parse_client_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"})
    gssapi = parse_client_properties({"security.protocol": "SASL_PLAINTEXT"})
    assert gssapi.settings["sasl_mechanism"] == "GSSAPI"  # Java's default mechanism
    plain = parse_client_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            "username=alice password='al1ce-pw';",
        }
    )
    assert (plain.settings["sasl_plain_username"], plain.settings["sasl_plain_password"]) == ("alice", "al1ce-pw")


def test_jaas_errors_never_show_the_password():
    bad = f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}"'  # no ';'
    with pytest.raises(ClientConfigError) as info:
        parse_client_properties({"sasl.jaas.config": bad})
    assert SECRET not in str(info.value) and "sasl.jaas.config" in str(info.value)
    other = f'com.example.CustomLoginModule required token="{SECRET}";'
    with pytest.raises(ClientConfigError) as info:
        parse_client_properties({"sasl.jaas.config": other})
    assert "CustomLoginModule" in str(info.value) and SECRET not in str(info.value)
    missing = f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";'
    with pytest.raises(ClientConfigError) as info:
        parse_client_properties({"sasl.jaas.config": missing})
    assert "username" in str(info.value) and SECRET not in str(info.value)


def test_repr_str_and_redacted_hide_secrets():
    config = parse_client_properties(parse_properties(SASL_SSL_PROPERTIES))
    for text in (repr(config), str(config), str(config.redacted()), f"{config}", str([config])):
        assert SECRET not in text and KEY_SECRET not in text
        assert REDACTED in text
        assert "offset-auditor" in text and "SCRAM-SHA-512" in text  # non-secrets stay readable
    assert config.redacted()["sasl_plain_password"] == REDACTED
    assert config.redacted()["ssl_password"] == REDACTED
    assert config.redacted()["metadata_recovery_rebootstrap_trigger_ms"] == 120000


def test_redact_text_mappings_and_exceptions():
    parse_client_properties(parse_properties(SASL_SSL_PROPERTIES))
    assert (
        redact(f"login failed for offset-auditor/{SECRET} at broker-1")
        == f"login failed for offset-auditor/{REDACTED} at broker-1"
    )
    # secrets never registered are still masked in key=value form
    assert (
        redact('sasl.jaas.config=x.PlainLoginModule required username="u" password="never-seen";').count("never-seen")
        == 0
    )
    assert redact("{'sasl_plain_password': 'other-unseen'}") == "{'sasl_plain_password': '[redacted]'}"
    props = parse_properties(SASL_SSL_PROPERTIES)
    shown = redact(props)
    assert shown["sasl.jaas.config"] == REDACTED and shown["ssl.key.password"] == REDACTED
    assert shown["bootstrap.servers"] == props["bootstrap.servers"]
    assert redact(RuntimeError(f"bad {KEY_SECRET}")) == f"RuntimeError: bad {REDACTED}"
    assert redact(["a", f"b {SECRET}"]) == ["a", f"b {REDACTED}"]
    assert redact(42) == 42
    assert is_secret_key("ssl.truststore.password") and is_secret_key("sasl_plain_password")
    assert not is_secret_key("ssl.truststore.location") and not is_secret_key("sasl_plain_username")


def test_redacting_log_filter(caplog):
    parse_client_properties(parse_properties(SASL_SSL_PROPERTIES))
    logger = logging.getLogger("test.redaction")
    logger.addFilter(RedactingFilter())
    try:
        with caplog.at_level(logging.INFO, logger="test.redaction"):
            logger.info("connecting with %s and %r", SECRET, {"ssl_password": KEY_SECRET})
    finally:
        logger.filters.clear()
    assert SECRET not in caplog.text and KEY_SECRET not in caplog.text
    assert REDACTED in caplog.text


def test_unreadable_file_error(tmp_path):
    missing = tmp_path / "nope.properties"
    with pytest.raises(ClientConfigError, match="nope.properties"):
        load_client_config(missing)


def test_with_overrides_keeps_kip1102_and_redaction():
    config = parse_client_properties({"metadata.recovery.strategy": "none"})
    updated = config.with_overrides(bootstrap_servers=["x:1"], sasl_plain_password="override-secret-1")
    assert isinstance(updated, ClientConfig)
    assert updated.bootstrap_servers == ["x:1"] and updated.metadata_recovery_strategy == "none"
    assert "override-secret-1" not in repr(updated)
    assert redact("pw override-secret-1") == f"pw {REDACTED}"
