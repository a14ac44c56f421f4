-- One row per group with committed offsets: its state, lag and worst verdict, and a status in the audit's own
-- words (not Burrow's: docs/metrics.md maps them to Burrow's nearest statuses).
-- Input views: group_committed (the committed_offsets table: verdict, lag, owner columns), group_findings (the
-- findings table), group_info (sql/group_state.sql: group_type, group_members).
-- Placeholders: {as_of} (a TIMESTAMP literal: the audit's time for a live cluster; NULL for log dirs, then the
-- newest commit of the audited groups), {stale_after_seconds}, {rule_order} (the judge's RULES, an array literal
-- of finding names, most decisive first: ties of severity are broken as the verdict's are).
-- status: AT_RISK (an error or critical finding), STALE (the latest commit is older than {stale_after_seconds}
-- at the audit while the group's partitions grew past it: total lag above 0), WARN (a warning), else OK.
-- partitions_remote: committed partitions whose next record Kafka will fetch from the remote tier (tiered storage).
WITH sev AS (
  SELECT * FROM VALUES ('critical', 4), ('error', 3), ('warning', 2), ('info', 1) AS s(severity, rank)
),
verdict_rank AS (
  SELECT f.group_id, f.topic, f.partition, f.committed_offset, f.commit_timestamp, f.finding, max(s.rank) AS rank
  FROM group_findings f JOIN sev s ON f.severity = s.severity
  WHERE f.group_id IS NOT NULL
  GROUP BY f.group_id, f.topic, f.partition, f.committed_offset, f.commit_timestamp, f.finding
),
parts AS (
  SELECT c.group_id, c.topic, c.partition, c.verdict, c.lag, c.log_end_offset, c.commit_timestamp, c.resume_tier,
         c.records_at_risk, coalesce(v.rank, 0) AS rank,
         coalesce(size({rule_order}) - array_position({rule_order}, c.verdict), -1) AS rule_rank
  FROM group_committed c
  LEFT JOIN verdict_rank v
    ON c.group_id = v.group_id AND c.topic = v.topic AND c.partition = v.partition
   AND c.committed_offset = v.committed_offset AND c.commit_timestamp <=> v.commit_timestamp
   AND c.verdict = v.finding
),
ranked AS (
  SELECT *,
         row_number() OVER (PARTITION BY group_id ORDER BY rank DESC, rule_rank DESC, topic, partition) AS worst_n,
         row_number() OVER (PARTITION BY group_id ORDER BY lag DESC NULLS LAST, topic, partition) AS lag_n
  FROM parts
),
per_group AS (
  SELECT group_id,
         count(*) AS partitions_committed,
         count_if(log_end_offset IS NULL) AS partitions_unknown,
         count_if(resume_tier = 'remote') AS partitions_remote,
         sum(lag) AS total_lag,
         max(lag) AS max_lag,
         max(CASE WHEN lag_n = 1 AND lag IS NOT NULL THEN topic END) AS max_lag_topic,
         max(CASE WHEN lag_n = 1 AND lag IS NOT NULL THEN partition END) AS max_lag_partition,
         max(CASE WHEN worst_n = 1 THEN verdict END) AS worst_verdict,
         max(CASE WHEN worst_n = 1 THEN rank END) AS worst_rank,
         max(CASE WHEN worst_n = 1 AND rank > 0 THEN topic END) AS worst_topic,
         max(CASE WHEN worst_n = 1 AND rank > 0 THEN partition END) AS worst_partition,
         sum(records_at_risk) AS records_at_risk,
         max(commit_timestamp) AS latest_commit_timestamp
  FROM ranked
  GROUP BY group_id
),
counts AS (
  SELECT group_id,
         count_if(severity = 'critical') AS findings_critical,
         count_if(severity = 'error') AS findings_error,
         count_if(severity = 'warning') AS findings_warning,
         count_if(severity = 'info') AS findings_info
  FROM group_findings WHERE group_id IS NOT NULL GROUP BY group_id
),
joined AS (
  SELECT g.*, i.group_type, i.group_state, i.group_protocol_type, i.group_protocol, i.group_members,
         coalesce(n.findings_critical, 0) AS findings_critical, coalesce(n.findings_error, 0) AS findings_error,
         coalesce(n.findings_warning, 0) AS findings_warning, coalesce(n.findings_info, 0) AS findings_info,
         coalesce({as_of}, max(g.latest_commit_timestamp) OVER ()) AS audited_as_of
  FROM per_group g
  LEFT JOIN group_info i ON g.group_id = i.group_id
  LEFT JOIN counts n ON g.group_id = n.group_id
)
SELECT group_id, group_type, group_state, group_protocol_type, group_protocol, group_members,
       partitions_committed, partitions_unknown, partitions_remote, total_lag, max_lag, max_lag_topic, max_lag_partition,
       worst_verdict,
       CASE worst_rank WHEN 4 THEN 'critical' WHEN 3 THEN 'error' WHEN 2 THEN 'warning' WHEN 1 THEN 'info' END
         AS worst_severity,
       worst_topic, worst_partition,
       findings_critical, findings_error, findings_warning, findings_info, records_at_risk,
       latest_commit_timestamp,
       unix_seconds(audited_as_of) - unix_seconds(latest_commit_timestamp) AS latest_commit_age_seconds,
       audited_as_of,
       CASE WHEN findings_critical + findings_error > 0 THEN 'AT_RISK'
            WHEN unix_seconds(audited_as_of) - unix_seconds(latest_commit_timestamp) > {stale_after_seconds}
                 AND total_lag > 0 THEN 'STALE'
            WHEN findings_warning > 0 THEN 'WARN'
            ELSE 'OK' END AS status
FROM joined
