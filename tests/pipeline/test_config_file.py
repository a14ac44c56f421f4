"""``--config FILE``: every flag of ``audit`` as a TOML key, the command line winning, bad files exit 2."""

import pytest

from audit.cli import build_parser, main
from audit.cli.config_file import ConfigFileError, config_arguments, with_config_file


def _parse(tmp_path, toml: str, *argv: str):
    path = tmp_path / "audit.toml"
    path.write_text(toml)
    from audit.cli import _audit_parser

    full = with_config_file(["audit", "--config", str(path), *argv], _audit_parser(), start=1)
    return build_parser().parse_args(full)


def test_every_kind_of_flag_has_a_key_and_the_command_line_wins(tmp_path):
    args = _parse(
        tmp_path,
        """
bootstrap-servers = "kafka-1:9092,kafka-2:9092"
command_config = "/etc/kafka/audit.properties"
output = "from-file"
fail-on = "critical"
log-dirs = ["/copies/b1", "/copies/b2"]
skip-reports = true
quiet = false
max-rows = 7
conf = ["spark.driver.memory=4g"]
pushgateway-label = ["cluster=prod"]
""",
        "--output",
        "from-cli",
        "--conf",
        "spark.ui.enabled=false",
    )
    assert args.bootstrap_servers == "kafka-1:9092,kafka-2:9092"
    assert args.client_config == "/etc/kafka/audit.properties"  # Kafka's name of the flag works as a key too
    assert args.output == "from-cli"  # the command line wins
    assert args.fail_on == "critical"
    assert args.log_dirs == ["/copies/b1", "/copies/b2"]
    assert args.skip_reports is True and args.quiet is False
    assert args.max_rows == 7
    assert args.conf == ["spark.driver.memory=4g", "spark.ui.enabled=false"]  # repeatable: both
    assert args.pushgateway_label == ["cluster=prod"]


def test_without_config_the_arguments_are_untouched(tmp_path):
    from audit.cli import _audit_parser

    argv = ["audit", "--conf", "spark.x=1", "--output", "o"]  # --conf is not an abbreviation of --config
    assert with_config_file(argv, _audit_parser(), start=1) == argv


@pytest.mark.parametrize(
    "toml, message",
    [
        ('outptu = "x"', "unknown key 'outptu'"),
        ('config = "other.toml"', "unknown key 'config'"),
        ('skip-reports = "yes"', "a switch takes true or false"),
        ('fail-on = ["error", "critical"]', "this flag takes one value"),
        ("output = ", "is not TOML"),
    ],
)
def test_a_bad_file_is_a_usage_error_naming_the_file_and_the_fix(tmp_path, capsys, toml, message):
    path = tmp_path / "audit.toml"
    path.write_text(toml)
    from audit.cli import _audit_parser

    with pytest.raises(ConfigFileError, match=message):
        config_arguments(str(path), _audit_parser())
    assert main(["audit", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kafka-offset-audit: error: --config") and str(path) in err and message in err


def test_a_missing_file_is_a_usage_error(tmp_path, capsys):
    assert main(["audit", "--config", str(tmp_path / "nope.toml"), "--output", str(tmp_path / "o")]) == 2
    assert "cannot read it" in capsys.readouterr().err


@pytest.mark.slow
def test_an_audit_runs_from_a_config_file(tmp_path, capsys):
    """The bundled scenario audited with its log dirs, output and fail-on from the file alone."""
    from audit.cli import demo_log_dirs

    path = tmp_path / "audit.toml"
    out = tmp_path / "out"
    path.write_text(f'log-dirs = ["{demo_log_dirs()}"]\noutput = "{out}"\nfail-on = "never"\nskip-reports = true\n')
    assert main(["audit", "--config", str(path)]) == 0
    assert (out / "findings").is_dir() and not (out / "report.html").exists()
