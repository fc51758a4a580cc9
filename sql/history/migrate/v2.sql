-- History schema version 1 -> 2: result_rows gains reason, the default mode's Reason column (the
-- rule that marked a row and its numbers, a dtype note, or why the row is unmatched). Rows recorded
-- before keep it NULL; the column is the last, as in a new file (sql/history/schema/10_tables.sql).
ALTER TABLE result_rows ADD COLUMN reason VARCHAR;
