-- KRaft __cluster_metadata -> the broker timeline (issue 12): one row per broker registration, fencing,
-- unfencing, controlled shutdown and unregistration, in log order.  Input view: metadata_records (one replica
-- of __cluster_metadata-0, ordered by seq).  Follows how the controller's BrokerRegistration changes
-- (ClusterControlManager.replay): RegisterBrokerRecord (a new incarnation: fenced unless it says not),
-- FenceBrokerRecord / UnfenceBrokerRecord (3.x), BrokerRegistrationChangeRecord (Fenced tag 0: 1 fence,
-- -1 unfence; InControlledShutdown tag 1), UnregisterBrokerRecord.  A fenced broker leads no partition:
-- its fencing is usually what moved leadership (and, with unclean election on, what let an out-of-sync
-- replica take over).  Records replayed from a snapshot have changed_at null.
-- Columns: broker_id int, broker_epoch bigint, metadata_offset bigint, changed_at timestamp, record_type string,
-- event string (registered, fenced, unfenced, controlled_shutdown, unregistered).
WITH b AS (
  SELECT broker_id, broker_epoch, seq, is_snapshot, offset, timestamp, record_type, fenced, in_controlled_shutdown
  FROM metadata_records
  WHERE decode_error IS NULL AND broker_id IS NOT NULL
    AND record_type IN ('RegisterBrokerRecord', 'FenceBrokerRecord', 'UnfenceBrokerRecord',
                        'BrokerRegistrationChangeRecord', 'UnregisterBrokerRecord')
),
events AS (
  SELECT *, 'registered' AS event FROM b WHERE record_type = 'RegisterBrokerRecord'
  UNION ALL SELECT *, 'fenced' FROM b WHERE record_type <> 'RegisterBrokerRecord' AND fenced = 1
  UNION ALL SELECT *, 'unfenced' FROM b WHERE record_type <> 'RegisterBrokerRecord' AND fenced = -1
  UNION ALL SELECT *, 'controlled_shutdown' FROM b WHERE in_controlled_shutdown = 1
  UNION ALL SELECT *, 'unregistered' FROM b WHERE record_type = 'UnregisterBrokerRecord'
)
SELECT broker_id, broker_epoch, CASE WHEN is_snapshot THEN NULL ELSE offset END AS metadata_offset,
       CASE WHEN is_snapshot THEN NULL ELSE timestamp_millis(timestamp) END AS changed_at, record_type, event
FROM events
ORDER BY seq, event
