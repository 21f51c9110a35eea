-- tlx_key(text): a BIGINT key of any text (60 bits of its md5), stored beside hashes and ids so
-- lookups scan integers, not 71-character strings; the text itself is always compared too.
-- md5 is fixed by its standard, so stored keys never change with the DuckDB version.
CREATE OR REPLACE TEMPORARY MACRO tlx_key(s) AS CAST(('0x' || substr(md5(s), 1, 15)) AS BIGINT);

-- tlx_kernel_name(source): the Triton kernel a kernel file is known by (run_identity's entry_point):
-- the first @triton.jit function (decorators before or after @triton.jit allowed) that the source
-- launches as `name[grid](...)`, else its first @triton.jit function ('' when it has none, NULL for no source). A
-- @triton.jit helper the kernel calls is never subscripted, so a file that defines one above its
-- kernel is still known by its kernel; a kernel launched only through a variable falls back to the
-- first.
CREATE OR REPLACE TEMPORARY MACRO tlx_jit_names(t) AS regexp_extract_all(
    t, '@triton\.jit[^\n]*\n(?:[ \t]*@[^\n]*\n)*[ \t]*def[ \t]+([A-Za-z_][A-Za-z0-9_]*)', 1);
CREATE OR REPLACE TEMPORARY MACRO tlx_kernel_name(t) AS CASE WHEN t IS NOT NULL THEN coalesce(
    list_filter(tlx_jit_names(t), n -> regexp_matches(t, '(?:^|[^A-Za-z0-9_.])' || n || '[ \t]*\['))[1],
    tlx_jit_names(t)[1],
    '') END;

-- tlx_id_key(event_id): the key of an event id. An id shaped as new_event_id makes them (a UUIDv7 in
-- 32 hex digits: 48 bits of time in ms, then the version digit 7) keeps its own first 60 bits, so
-- keys grow with time and a range of keys prunes the scan to the blocks of that stretch of time;
-- any other id gets tlx_key. A key only narrows a search: the ids themselves are compared after it.
CREATE OR REPLACE TEMPORARY MACRO tlx_id_key(s) AS coalesce(
    CASE WHEN length(s) = 32 AND substr(s, 13, 1) = '7' THEN TRY_CAST(('0x' || substr(s, 1, 15)) AS BIGINT) END,
    tlx_key(s));
