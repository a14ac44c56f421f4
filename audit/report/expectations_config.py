"""Thresholds and known value sets for the audit-output expectation suite.

The defaults live here, in code, so they are versioned with the suite.  A run
can override any of them from a JSON or YAML file (or a dict)::

    # expectations.yaml
    min_verifiable_commit_share: 0.8
    fail_on_severities: [critical, error]

    cfg = load_expectations_config("expectations.yaml")

Unknown keys are rejected, so a typo in an override file fails loudly instead
of being ignored.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..tables import SEVERITIES


__all__ = [
    "DEFAULT_FINDING_SEVERITIES",
    "KNOWN_FINDINGS",
    "KNOWN_SEVERITIES",
    "ConfigSource",
    "ExpectationsConfig",
    "load_expectations_config",
]

#: Finding names of the audit contract (AUDIT_RULES.md).
KNOWN_FINDINGS: Tuple[str, ...] = (
    "LOG_TRUNCATION",
    "UNKNOWN_LEADER_EPOCH",
    "BEHIND_METADATA_EPOCH",
    "OFFSET_OUT_OF_RANGE",
    "OFFSET_REWIND",
    "EPOCH_UNVERIFIABLE",
    "REPLICA_DIVERGENCE",
    "PARTITION_EXPANSION_ORDER",
)

#: Severities, most severe first.
KNOWN_SEVERITIES: Tuple[str, ...] = SEVERITIES

#: Which severities each finding may carry (AUDIT_RULES.md's table).
DEFAULT_FINDING_SEVERITIES: Dict[str, List[str]] = {
    "LOG_TRUNCATION": ["critical"],
    "UNKNOWN_LEADER_EPOCH": ["error", "warning"],
    "BEHIND_METADATA_EPOCH": ["error", "warning"],
    "OFFSET_OUT_OF_RANGE": ["error"],
    "OFFSET_REWIND": ["warning"],
    "EPOCH_UNVERIFIABLE": ["info"],
    "REPLICA_DIVERGENCE": ["error", "warning"],
    "PARTITION_EXPANSION_ORDER": ["warning"],
}

ConfigSource = Union[None, str, "os.PathLike[str]", Mapping[str, Any], "ExpectationsConfig"]


class ExpectationsConfig(BaseModel):
    """Thresholds of the audit-output expectation suite.

    Fields:
        fail_on_severities: findings of these severities fail the suite
            (default ``["critical"]``; ``[]`` disables the check).
        min_verifiable_commit_share: least share (0..1) of latest committed
            offsets whose leader epoch is >= 0, i.e. that a client can check for
            truncation (default 0.5; 0 disables the check).
        min_committed_offsets: least number of rows in ``committed_offsets/``
            (default 1: an audit that found no commit at all read nothing useful).
        min_records_read: least total of ``summary.json``'s
            ``records_read.by_record_type`` (default 1).
        max_skipped_fraction: most ``records_skipped / records_read`` allowed
            (default ``None``: not checked).
        max_corrupt_batches: most entries in ``records_skipped.where``
            (default ``None``: not checked).
        min_detail_length: least length of a finding's ``detail`` text (default 20).
        known_findings / known_severities: the value sets of ``finding`` and
            ``severity``; ``verdict`` may be ``OK`` or a known finding.
        finding_severities: the (finding, severity) pairs allowed.
        known_value_versions: ``OffsetCommitValue`` versions the reader supports.
        result_format: GX result format (``BOOLEAN_ONLY``, ``BASIC``,
            ``SUMMARY``, ``COMPLETE``); default ``SUMMARY``.
        partial_unexpected_count: how many unexpected values GX keeps per
            expectation in the result (default 20).
        build_data_docs: build the Data Docs site (default True).
        suite_prefix: prefix of the suite names (default ``kafka_offset_audit``).
        engine: where GX computes its metrics: ``auto`` (default) validates a table of at most
            ``pandas_max_rows`` rows with GX's pandas engine (the table is read once into the driver,
            bounded by that limit) and a larger one with its Spark engine; ``spark`` / ``pandas``
            force one (``pandas`` still refuses a table above the limit).  Same expectations,
            same verdicts; the Spark engine runs one or more Spark jobs per expectation.
        pandas_max_rows: the row limit of the pandas engine (default 200,000 per table).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    fail_on_severities: List[str] = Field(default_factory=lambda: ["critical"])
    min_verifiable_commit_share: float = Field(default=0.5, ge=0.0, le=1.0)
    min_committed_offsets: int = Field(default=1, ge=0)
    min_records_read: int = Field(default=1, ge=0)
    max_skipped_fraction: Optional[float] = Field(default=None, ge=0.0)
    max_corrupt_batches: Optional[int] = Field(default=None, ge=0)
    min_detail_length: int = Field(default=20, ge=0)
    known_findings: List[str] = Field(default_factory=lambda: list(KNOWN_FINDINGS))
    known_severities: List[str] = Field(default_factory=lambda: list(KNOWN_SEVERITIES))
    finding_severities: Dict[str, List[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_FINDING_SEVERITIES.items()}
    )
    known_value_versions: List[int] = Field(default_factory=lambda: [0, 1, 2, 3, 4])
    result_format: str = "SUMMARY"
    partial_unexpected_count: int = Field(default=20, ge=0)
    build_data_docs: bool = True
    suite_prefix: str = Field(default="kafka_offset_audit", pattern=r"^[A-Za-z0-9_.-]+$")
    engine: Literal["auto", "spark", "pandas"] = "auto"
    pandas_max_rows: int = Field(default=200_000, ge=0)

    @field_validator("result_format")
    @classmethod
    def _check_result_format(cls, v: str) -> str:
        v = v.upper()
        if v not in ("BOOLEAN_ONLY", "BASIC", "SUMMARY", "COMPLETE"):
            raise ValueError(f"unknown result_format {v!r}")
        return v

    @model_validator(mode="after")
    def _check_sets(self) -> "ExpectationsConfig":
        bad = set(self.fail_on_severities) - set(self.known_severities)
        if bad:
            raise ValueError(f"fail_on_severities not in known_severities: {sorted(bad)}")
        for finding, sevs in self.finding_severities.items():
            if finding not in self.known_findings:
                raise ValueError(f"finding_severities names unknown finding {finding!r}")
            unknown = set(sevs) - set(self.known_severities)
            if unknown:
                raise ValueError(f"finding_severities[{finding!r}] has unknown severities {sorted(unknown)}")
        return self

    def finding_severity_pairs(self) -> List[Tuple[str, str]]:
        """Return the allowed (finding, severity) pairs as a sorted list of tuples."""
        return sorted((f, s) for f, sevs in self.finding_severities.items() for s in sevs)


def load_expectations_config(source: ConfigSource = None) -> ExpectationsConfig:
    """Build an :class:`ExpectationsConfig` from defaults and an optional override.

    Parameters
    ----------
    source : None, ExpectationsConfig, mapping, str or os.PathLike, optional
        ``None`` (code defaults), an ``ExpectationsConfig`` (returned as is), a mapping of field overrides, or the
        path of a ``.json``, ``.yaml`` or ``.yml`` file holding such a mapping (an empty YAML file means defaults).

    Returns
    -------
    ExpectationsConfig
        The defaults with the override applied.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        The file is neither JSON nor YAML, or does not hold a mapping.
    pydantic.ValidationError
        An unknown key or an out-of-range value.
    """
    if source is None:
        return ExpectationsConfig()
    if isinstance(source, ExpectationsConfig):
        return source
    if isinstance(source, Mapping):
        return ExpectationsConfig.model_validate(dict(source))
    path = os.fspath(source)
    with open(path, "r", encoding="utf-8") as fh:
        text = fh.read()
    ext = os.path.splitext(path)[1].lower()
    if ext == ".json":
        data = json.loads(text) if text.strip() else {}
    elif ext in (".yaml", ".yml"):
        from ruamel.yaml import YAML  # a dependency of great-expectations

        data = YAML(typ="safe", pure=True).load(text) or {}
    else:
        raise ValueError(f"expectations config must be .json, .yaml or .yml: {path}")
    if not isinstance(data, Mapping):
        raise ValueError(f"expectations config {path} must hold a mapping, not {type(data).__name__}")
    return ExpectationsConfig.model_validate(dict(data))
