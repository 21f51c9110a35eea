-- The incoming events the store does not hold yet.
CREATE OR REPLACE TEMPORARY TABLE fresh AS
SELECT i.* FROM incoming i ANTI JOIN taken t ON t.run_id = i.run_id AND t.seq = i.seq;
