-- The events a projection pass covers: pos in [$lo, $hi), the columns project.sql reads.
CREATE OR REPLACE TEMPORARY TABLE unprojected AS
SELECT run_id, seq, recorded_at, type, payload FROM events WHERE pos >= $lo AND pos < $hi;
