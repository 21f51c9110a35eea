-- The machine each run measured on (RunEnvironment: at its start, and again at each resume):
-- driver, persistence mode, application clocks, power limit, the GPU's NUMA node, the harness
-- child's CPU affinity and the CPUs' governor; unavailable says why NVML could not be read.
SELECT
    run_id,
    p.source, p.unavailable, p.gpu_name, p.gpu_uuid, p.pci_bus_id, p.driver_version, p.cuda_driver_version,
    p.persistence_mode, p.application_sm_clock_mhz, p.application_mem_clock_mhz,
    p.default_application_sm_clock_mhz, p.max_sm_clock_mhz, p.power_limit_w, p.default_power_limit_w,
    p.gpu_numa_node, p.cpu_affinity, p.cpu_governor,
    recorded_at,
    seq AS event_seq
FROM (
    SELECT run_id, seq, recorded_at, from_json(payload, '{"source": "VARCHAR", "unavailable": "VARCHAR",
        "gpu_name": "VARCHAR", "gpu_uuid": "VARCHAR", "pci_bus_id": "VARCHAR", "driver_version": "VARCHAR",
        "cuda_driver_version": "VARCHAR", "persistence_mode": "BOOLEAN", "application_sm_clock_mhz": "INTEGER",
        "application_mem_clock_mhz": "INTEGER", "default_application_sm_clock_mhz": "INTEGER",
        "max_sm_clock_mhz": "INTEGER", "power_limit_w": "DOUBLE", "default_power_limit_w": "DOUBLE",
        "gpu_numa_node": "INTEGER", "cpu_affinity": "INTEGER[]", "cpu_governor": "VARCHAR"}') AS p
    FROM events WHERE type = 'RunEnvironment'
)
