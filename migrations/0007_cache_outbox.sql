-- Objects whose cached copy (the Redis object cache) must go: written in
-- the transaction that changed the object's row or one of its counts, on
-- the object's shard, and deleted once Redis has taken the invalidation
-- (token: the writing transaction's, so a later change keeps its own row).
-- A server that dies, or a Redis that is away, leaves rows here; every
-- server's sweep sends them until Redis takes them.
CREATE TABLE IF NOT EXISTS cache_outbox (
  object_id  BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  token      BIGINT UNSIGNED NOT NULL,
  created_at DATETIME(6) NOT NULL,
  KEY by_created (created_at)
) ENGINE=InnoDB
