-- Per run of the fresh events: their seq range and count, and where the store's sequence stands.
SELECT f.run_id, min(f.seq) AS lo, max(f.seq) AS hi, count(*) AS n, count(DISTINCT f.seq) AS distinct_seqs,
       coalesce(any_value(h.next_seq), 0) AS next_seq
FROM fresh f
LEFT JOIN run_heads h ON h.run_id = f.run_id
GROUP BY f.run_id
ORDER BY f.run_id
