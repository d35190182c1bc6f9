-- A write's cache_outbox rows are its own: keyed by (object_id, token),
-- so writes changing one object at once (pins going to one board) each
-- insert a row beside the others instead of queueing to update one row,
-- and each write's invalidation deletes its own rows. The table holds
-- only the marks of the last moments (and, while Redis is away, of the
-- writes since), so the sweep reads it without an index on created_at.
-- Run again, these statements leave the table as they made it.
ALTER TABLE cache_outbox DROP PRIMARY KEY, ADD PRIMARY KEY (object_id, token)
;
ALTER TABLE cache_outbox DROP INDEX IF EXISTS by_created
