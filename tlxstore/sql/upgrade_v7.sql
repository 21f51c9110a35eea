-- Store schema v6 -> v7, in its own transaction (tlxstore/store/schema.py: upgrade): the
-- machine's state per benchmark call (MachineSampled). A v6 store holds none of those events (the
-- tlxdb that wrote it refused event types it did not know), so the table starts empty.
CREATE TABLE proj_machine (
    run_id VARCHAR NOT NULL,
    candidate_id VARCHAR NOT NULL,
    case_id VARCHAR NOT NULL,
    phase VARCHAR NOT NULL,
    window_id VARCHAR,
    block INTEGER NOT NULL,
    event_seq BIGINT NOT NULL,
    readings INTEGER,
    duration_ms DOUBLE,
    sm_clock_min_mhz DOUBLE,
    sm_clock_median_mhz DOUBLE,
    sm_clock_max_mhz DOUBLE,
    mem_clock_min_mhz DOUBLE,
    mem_clock_median_mhz DOUBLE,
    power_median_w DOUBLE,
    power_max_w DOUBLE,
    temperature_max_c DOUBLE,
    reasons JSON,
    neighbours JSON,
    source VARCHAR
);
UPDATE tlxdb_meta SET value = '7' WHERE key = 'store_schema_version';
