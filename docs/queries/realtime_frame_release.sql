WITH n AS (SELECT condition, scheme, trial, input_to_display_p50_ms p50, input_to_display_p95_ms p95, freezes, bitrate_mbps mbps,
                  CAST(json_extract(i2d_parts_p50_ms, '$.jitter_buffer') AS DOUBLE) jb
           FROM 'results/published/realtime.parquet' WHERE rt_app = 'cloud-gaming' AND valid),
     m AS (SELECT condition, scheme, trial, input_to_display_p50_ms p50, input_to_display_p95_ms p95, freezes, bitrate_mbps mbps,
                  CAST(json_extract(i2d_parts_p50_ms, '$.jitter_buffer') AS DOUBLE) jb
           FROM 'results/published/realtime_marker.parquet' WHERE valid)
SELECT condition, scheme, count(*) AS pairs,
       round(avg(n.jb), 1) AS jb_next, round(avg(m.jb), 1) AS jb_marker,
       round(avg(n.p50), 1) AS p50_next, round(avg(m.p50), 1) AS p50_marker,
       round(avg(n.p95), 1) AS p95_next, round(avg(m.p95), 1) AS p95_marker,
       round(min(m.p95 - n.p95), 1) AS p95_diff_min, round(max(m.p95 - n.p95), 1) AS p95_diff_max,
       sum(CAST(m.p95 < n.p95 AS INT)) AS pairs_lower,
       sum(n.freezes) AS freezes_next, sum(m.freezes) AS freezes_marker,
       round(avg(n.mbps), 2) AS mbps_next, round(avg(m.mbps), 2) AS mbps_marker
FROM n JOIN m USING (condition, scheme, trial) GROUP BY ALL ORDER BY condition, scheme
