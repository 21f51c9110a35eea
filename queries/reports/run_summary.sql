-- The run: identity, device, tools, provider, how it finished, its winner, tokens and cost.
SELECT * FROM runs WHERE run_id = $run_id
