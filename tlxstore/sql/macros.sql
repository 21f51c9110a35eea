-- tlx_key(text): a BIGINT key of any text (60 bits of its md5), stored beside hashes and ids so
-- lookups scan integers, not 71-character strings; the text itself is always compared too.
-- md5 is fixed by its standard, so stored keys never change with the DuckDB version.
CREATE OR REPLACE TEMPORARY MACRO tlx_key(s) AS CAST(('0x' || substr(md5(s), 1, 15)) AS BIGINT);
