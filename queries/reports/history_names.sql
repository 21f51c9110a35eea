-- The names `tlxdb history` takes, one row per kernel of the store: its kernel_id, its entry
-- point (the first @triton.jit function it launches) and the file it was run from; what a history of a name
-- with no run suggests.
SELECT DISTINCT kernel_id, entry_point, kernel_file
FROM runs
ORDER BY kernel_id
