"""Great Expectations suite over the audit's output directory.

``run_expectations(spark, output_dir)`` reads the Parquet tables the audit
wrote (``findings/``, ``committed_offsets/``, ``commits/`` if present,
``epochs/``, ``bounds/``) and ``summary.json``, validates each one
against its own expectation suite through a GX Checkpoint, writes the combined validation
result to ``<output>/expectations/validation_result.json`` and builds a Data
Docs site into ``<output>/data_docs/`` (``index.html``).

Where GX computes (``ExpectationsConfig.engine``): a table of at most
``pandas_max_rows`` rows (default 200,000) is read once into the driver (pyarrow
for a local output, one Spark ``toPandas`` otherwise) and validated by GX's
pandas engine; a larger one is validated by GX's Spark engine in the caller's
SparkSession, which runs one or more Spark jobs per expectation (about 140 for
the whole suite), the fixed cost that dominated a small audit.

The GX context is ephemeral (in memory): nothing is written to the repository
or the home directory; only the two output paths above are touched.

What the suites check (thresholds from :class:`ExpectationsConfig`):

* findings: contract columns present; keys not null; ``finding`` and
  ``severity`` in the known sets and paired as AUDIT_RULES.md says; no finding
  of a failing severity (default: no ``critical``); a ``LOG_TRUNCATION`` row
  carries ``divergence_offset`` below its committed offset and
  ``records_at_risk`` >= 1; every row has a ``detail`` text.
* committed_offsets: contract columns present; at least N rows;
  ``(group_id, topic, partition)`` unique; ``committed_offset`` >= 0;
  ``committed_leader_epoch`` >= -1; the share of verifiable commits
  (epoch >= 0) above a floor; ``verdict`` is ``OK`` or a known finding;
  ``value_version`` known.
* commits (history mode, when present): offsets >= 0, epochs >= -1, value
  versions known.
* epochs: epochs and start offsets >= 0; one entry per (topic, partition,
  broker, epoch).
* bounds: one row per (topic, partition); 0 <= log start <= high watermark <=
  log end.
* groups (when present): one row per group, a known status, and consistent
  with the other tables: its partitions are the group's rows in
  ``committed_offsets/``, its finding counts its rows in ``findings/``, its worst
  verdict is one of its partitions' verdicts at the most severe of their
  severities, and every group of ``committed_offsets/`` has its row.
* summary (from ``summary.json``): records were read; optionally the skipped
  fraction and corrupt batch count are bounded; its findings total equals the
  number of rows in ``findings/``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from audit.report.expectations_config import (
    ConfigSource,
    ExpectationsConfig,
    load_expectations_config,
)
from audit.report.expectations_inputs import add_group_type, read_inputs
from audit.report.expectations_suites import (
    ALL_ASSETS,
    BOUNDS_REQUIRED,
    COMMITS_REQUIRED,
    COMMITTED_REQUIRED,
    EPOCHS_REQUIRED,
    GROUPS_REQUIRED,
    PARQUET_ASSETS,
    REQUIRED_ASSETS,
    TRUNCATION_CAUSES,
    build_suites,
    import_gx,
)


__all__ = [
    "ALL_ASSETS",
    "BOUNDS_REQUIRED",
    "COMMITS_REQUIRED",
    "COMMITTED_REQUIRED",
    "DATA_DOCS_DIRNAME",
    "EPOCHS_REQUIRED",
    "GROUPS_REQUIRED",
    "PARQUET_ASSETS",
    "REQUIRED_ASSETS",
    "RESULT_RELPATH",
    "TRUNCATION_CAUSES",
    "ExpectationsOutcome",
    "FailedExpectation",
    "build_suites",
    "import_gx",
    "run_expectations",
]

log = logging.getLogger(__name__)


RESULT_RELPATH = os.path.join("expectations", "validation_result.json")
DATA_DOCS_DIRNAME = "data_docs"
_SITE_NAME = "audit_output"


@dataclass(frozen=True)
class FailedExpectation:
    """One expectation that did not pass.

    ``check`` is the stable name this module gives the expectation (e.g.
    ``findings.no_failing_severity``); ``observed`` is GX's result dict
    (observed value, unexpected counts and a few unexpected values);
    ``exception`` is set when GX could not evaluate it (e.g. a missing column).
    """

    asset: str
    check: str
    expectation_type: str
    column: Optional[str]
    observed: Dict[str, Any]
    exception: Optional[str] = None


@dataclass(frozen=True)
class ExpectationsOutcome:
    """What :func:`run_expectations` found.

    Attributes
    ----------
    success : bool
        Every evaluated expectation passed.
    statistics : dict
        ``evaluated_expectations``, ``successful_expectations``, ``unsuccessful_expectations``, ``success_percent``
        over all assets, plus ``by_asset`` with the same four per asset.
    result_path : str
        Path of the combined validation result JSON.
    data_docs_index : str or None
        Path of the Data Docs ``index.html`` (None when not built).
    failed : list of FailedExpectation
        The expectations that failed.
    skipped_assets : list of str
        Optional tables that were absent (e.g. ``commits``).
    """

    success: bool
    statistics: Dict[str, Any]
    result_path: str
    data_docs_index: Optional[str]
    failed: List[FailedExpectation] = field(default_factory=list)
    skipped_assets: List[str] = field(default_factory=list)

    @property
    def failed_checks(self) -> List[str]:
        """Names (``<asset>.<check>``) of the failed expectations, sorted."""
        return sorted(f.check for f in self.failed)


def _result_format(cfg: ExpectationsConfig) -> Dict[str, Any]:
    return {
        "result_format": cfg.result_format,
        "partial_unexpected_count": cfg.partial_unexpected_count,
    }


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    if hasattr(obj, "to_json_dict"):
        return obj.to_json_dict()
    try:  # numpy / pandas scalars of the pandas engine: the plain value (pd.NA -> None)
        import numpy as np
        import pandas as pd

        if obj is pd.NA or obj is pd.NaT:
            return None
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, pd.Timestamp):
            return obj.isoformat()
    except ImportError:  # pragma: no cover
        pass
    return str(obj)


def run_expectations(
    spark,
    output_dir: str,
    config: ConfigSource = None,
    assets: Optional[Sequence[str]] = None,
    tables_dir: Optional[str] = None,
) -> ExpectationsOutcome:
    """Validate an audit output directory with Great Expectations.

    The pandas engine is used for small tables, Spark for large ones: ``ExpectationsConfig.engine``.

    Parameters
    ----------
    spark : SparkSession
        The active ``pyspark.sql.SparkSession`` (GX validates in it).
    output_dir : str
        The audit's output directory, holding the Parquet tables ``findings/``, ``committed_offsets/``,
        ``epochs/``, ``bounds/``, optionally ``commits/`` (history mode) and ``summary.json``.  The tables need
        the contract's columns (see the module docstring); extra columns are allowed.
    config : ConfigSource
        Thresholds: an :class:`ExpectationsConfig`, a mapping of overrides, a JSON/YAML file path, or None for
        the defaults.
    assets : sequence of str, optional
        Validate only these of :data:`ALL_ASSETS` (default: all); e.g. ``["committed_offsets"]`` for a quick
        check.
    tables_dir : str, optional
        Where the tables and ``summary.json`` are, when not in ``output_dir``: any Hadoop-compatible URI (the
        audit's staged output on HDFS, S3 ...); ``output_dir`` is then a local directory for the validation
        result and Data Docs only.

    Returns
    -------
    ExpectationsOutcome
        Side effects: writes ``<output_dir>/expectations/validation_result.json`` (overall success and
        statistics, the config used, and each asset's GX validation result) and, unless
        ``config.build_data_docs`` is false, replaces ``<output_dir>/data_docs/`` with a fresh Data Docs site.

    Raises
    ------
    FileNotFoundError
        ``output_dir`` or a required table is missing.
    pydantic.ValidationError, ValueError
        A bad config or asset name, or ``engine='pandas'`` with a table above ``pandas_max_rows``.
    """
    cfg = load_expectations_config(config)
    wanted = _wanted_assets(assets)
    output_dir = os.path.abspath(output_dir)
    if not os.path.isdir(output_dir):
        raise FileNotFoundError(f"audit output directory not found: {output_dir}")

    gx = import_gx()
    suites = build_suites(cfg)
    frames, skipped = read_inputs(spark, tables_dir or output_dir, wanted, cfg)
    add_group_type(frames)

    docs_dir = os.path.join(output_dir, DATA_DOCS_DIRNAME)
    ctx = _ephemeral_context(gx, cfg, docs_dir)
    run_id = gx.RunIdentifier(run_name=f"audit-{os.path.basename(output_dir)}")
    cached: List[Any] = []
    try:
        results = _validate_frames(gx, ctx, frames, suites, cfg, run_id, cached)
        docs_index = _build_data_docs(ctx, cfg, docs_dir)
    finally:
        for df in cached:
            try:
                df.unpersist()
            except Exception:  # pragma: no cover
                pass

    return _write_outcome(output_dir, cfg, results, skipped, docs_index)


def _wanted_assets(assets: Optional[Sequence[str]]) -> List[str]:
    """Return the assets to validate (all of :data:`ALL_ASSETS` for None).

    Raises
    ------
    ValueError
        For an unknown or empty selection.
    """
    wanted = list(ALL_ASSETS) if assets is None else list(assets)
    unknown = sorted(set(wanted) - set(ALL_ASSETS))
    if unknown or not wanted:
        raise ValueError(f"assets must be a non-empty subset of {list(ALL_ASSETS)}: {unknown}")
    return wanted


def _ephemeral_context(gx: Any, cfg: ExpectationsConfig, docs_dir: str) -> Any:
    """Create an ephemeral GX context, quiet (no analytics, no progress bars).

    Its only Data Docs site is ``docs_dir`` (emptied first) when ``cfg.build_data_docs``, else none.
    """
    ctx = gx.get_context(mode="ephemeral")
    try:
        ctx.enable_analytics(False)
    except Exception:  # pragma: no cover - older/newer GX without the switch
        pass
    try:
        ctx.variables.progress_bars = {"globally": False, "metric_calculations": False}
    except Exception:  # pragma: no cover
        pass
    for site in list((ctx.get_config().data_docs_sites or {}).keys()):
        ctx.delete_data_docs_site(site)
    if cfg.build_data_docs:
        if os.path.isdir(docs_dir):
            shutil.rmtree(docs_dir)
        ctx.add_data_docs_site(
            site_name=_SITE_NAME,
            site_config={
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": docs_dir,
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
    return ctx


def _validate_frames(
    gx: Any,
    ctx: Any,
    frames: Dict[str, Any],
    suites: Dict[str, Any],
    cfg: ExpectationsConfig,
    run_id: Any,
    cached: List[Any],
) -> Dict[str, Any]:
    """Run each frame's suite through its own GX Checkpoint.

    A Spark frame is persisted for its run and appended to ``cached`` (the caller unpersists them).

    Returns
    -------
    dict
        ``{asset_name: validation result}``.
    """
    datasources: Dict[str, Any] = {}
    results: Dict[str, Any] = {}
    for asset_name, df in frames.items():
        engine = "spark" if hasattr(df, "sparkSession") else "pandas"
        if engine == "spark":
            df = df.persist()
            cached.append(df)
        if engine not in datasources:
            datasources[engine] = (
                ctx.data_sources.add_spark(name="audit_output", persist=False)
                if engine == "spark"
                else ctx.data_sources.add_pandas(name="audit_output_pandas")
            )
        asset = datasources[engine].add_dataframe_asset(name=asset_name)
        batch_def = asset.add_batch_definition_whole_dataframe(name=f"{asset_name}_all")
        gx_suite = ctx.suites.add(suites[asset_name])
        vdef = ctx.validation_definitions.add(
            gx.ValidationDefinition(name=f"validate_{asset_name}", data=batch_def, suite=gx_suite)
        )
        checkpoint = ctx.checkpoints.add(
            gx.Checkpoint(
                name=f"checkpoint_{asset_name}",
                validation_definitions=[vdef],
                actions=[],
                result_format=_result_format(cfg),
            )
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cp_result = checkpoint.run(batch_parameters={"dataframe": df}, run_id=run_id)
        results[asset_name] = list(cp_result.run_results.values())[0]
    return results


def _build_data_docs(ctx: Any, cfg: ExpectationsConfig, docs_dir: str) -> Optional[str]:
    """Build the Data Docs site into ``docs_dir`` and make it work offline when ``cfg.build_data_docs``.

    Returns
    -------
    str or None
        The path of its ``index.html``, None when not built.
    """
    if not cfg.build_data_docs:
        return None
    ctx.build_data_docs(site_names=[_SITE_NAME])
    index = os.path.join(docs_dir, "index.html")
    docs_index = index if os.path.isfile(index) else None
    if docs_index:
        from .offline_docs import make_offline

        make_offline(docs_dir)  # GX's pages load their assets from CDNs: bundle them
    return docs_index


def _exception_message(info: Any) -> Optional[str]:
    """Get the message of GX's exception_info.

    GX's exception_info is either one {raised_exception, exception_message} dict or,
    for metric errors, a dict of them keyed by metric id.
    """
    if not isinstance(info, dict):
        return None
    if "raised_exception" in info or "exception_message" in info:
        if info.get("raised_exception") or info.get("exception_message"):
            return str(info.get("exception_message"))
        return None
    messages = [
        str(v.get("exception_message")) for v in info.values() if isinstance(v, dict) and v.get("exception_message")
    ]
    return "; ".join(dict.fromkeys(messages)) or None


def _write_outcome(
    output_dir: str,
    cfg: ExpectationsConfig,
    results: Dict[str, Any],
    skipped: List[str],
    docs_index: Optional[str],
) -> ExpectationsOutcome:
    failed: List[FailedExpectation] = []
    by_asset: Dict[str, Dict[str, Any]] = {}
    totals = {"evaluated_expectations": 0, "successful_expectations": 0, "unsuccessful_expectations": 0}
    for asset_name, vr in results.items():
        stats = dict(vr.statistics)
        by_asset[asset_name] = {
            k: stats.get(k)
            for k in (
                "evaluated_expectations",
                "successful_expectations",
                "unsuccessful_expectations",
                "success_percent",
            )
        }
        for k in totals:
            totals[k] += int(stats.get(k) or 0)
        for r in vr.results:
            if r.success:
                continue
            conf = r.expectation_config
            meta = conf.meta or {}
            exc = _exception_message(r.exception_info)
            failed.append(
                FailedExpectation(
                    asset=asset_name,
                    check=str(meta.get("check", f"{asset_name}.{conf.type}")),
                    expectation_type=conf.type,
                    column=conf.kwargs.get("column"),
                    observed=json.loads(json.dumps(r.result or {}, default=_json_default)),
                    exception=exc,
                )
            )
    evaluated = totals["evaluated_expectations"]
    statistics: Dict[str, Any] = dict(totals)
    statistics["success_percent"] = 100.0 * totals["successful_expectations"] / evaluated if evaluated else 100.0
    statistics["by_asset"] = by_asset
    success = all(vr.success for vr in results.values())

    result_path = os.path.join(output_dir, RESULT_RELPATH)
    os.makedirs(os.path.dirname(result_path), exist_ok=True)
    document = {
        "success": success,
        "statistics": statistics,
        "failed_checks": sorted(f.check for f in failed),
        "skipped_assets": skipped,
        "data_docs_index": docs_index,
        "config": cfg.model_dump(),
        "validation_results": {name: vr.to_json_dict() for name, vr in results.items()},
    }
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=2, default=_json_default)

    log.info(
        "audit output expectations %s: %d of %d met%s; result %s",
        "passed" if success else "FAILED",
        totals["successful_expectations"],
        evaluated,
        f" (failed: {', '.join(sorted(f.check for f in failed))})" if failed else "",
        result_path,
    )
    return ExpectationsOutcome(
        success=success,
        statistics=statistics,
        result_path=result_path,
        data_docs_index=docs_index,
        failed=failed,
        skipped_assets=skipped,
    )
