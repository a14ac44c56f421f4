"""An Airflow ``kafka`` connection (librdkafka names, the Kafka provider's) as the audit's client properties: the
file written is read back by the audit's own ``--client-config`` loader with the same meaning."""

import os
import stat

import pytest

from audit.sources.client_config import load_client_config
from audit.sources.connection_properties import connection_properties, write_client_properties

SECRET = 'p"w\\ 7f3c'  # a quote, a backslash and a space: each must survive the file and the JAAS quoting


def test_a_librdkafka_connection_reads_back_with_the_same_settings(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    extra = {
        "bootstrap.servers": "k1:9093,k2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "audit",
        "sasl.password": SECRET,
        "ssl.ca.location": str(ca),
        "group.id": "airflow-consumer",  # the audit joins no group
        "enable.auto.commit": False,
        "client.id": "koa-airflow",
    }
    bootstrap, props = connection_properties(extra)
    assert bootstrap == "k1:9093,k2:9093"
    assert "group.id" not in props and "enable.auto.commit" not in props
    path = write_client_properties(props, str(tmp_path / "client.properties"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    s = load_client_config(path).settings
    assert (s["security_protocol"], s["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (s["sasl_plain_username"], s["sasl_plain_password"]) == ("audit", SECRET)
    assert s["ssl_cafile"] == str(ca) and s["client_id"] == "koa-airflow"


def test_host_port_and_login_stand_in_for_missing_extras(tmp_path):
    bootstrap, props = connection_properties(
        {"security.protocol": "SASL_PLAINTEXT"}, host="kafka-1", port=9092, login="audit", password=SECRET
    )
    assert bootstrap == "kafka-1:9092"
    s = load_client_config(write_client_properties(props, str(tmp_path / "c.properties"))).settings
    assert (s["sasl_mechanism"], s["sasl_plain_username"], s["sasl_plain_password"]) == ("PLAIN", "audit", SECRET)
    assert connection_properties({}, host="a:1,b:2")[0] == "a:1,b:2"


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"security.protocol": "SSL"}, "names no bootstrap servers"),
        (
            {"bootstrap.servers": "k:1", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": SECRET},
            "give sasl.jaas.config",
        ),
    ],
)
def test_what_cannot_be_mapped_says_so_without_the_secret(extra, message):
    with pytest.raises(ValueError, match=message) as err:
        connection_properties(extra)
    assert SECRET not in str(err.value)
