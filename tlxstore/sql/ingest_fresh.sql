-- The incoming events the store does not hold yet.
CREATE OR REPLACE TEMPORARY TABLE fresh AS
SELECT i.* FROM incoming i ANTI JOIN taken t ON t.run_id = i.run_id AND t.seq = i.seq;

CREATE OR REPLACE TEMPORARY VIEW fresh_samples AS
SELECT s.* FROM incoming_samples s SEMI JOIN fresh f ON f.run_id = s.run_id AND f.seq = s.event_seq;
