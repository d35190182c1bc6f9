-- Pins whose fan-out to followers' feeds is not known to be done: written in
-- the pin's own create transaction (on its shard), and again with remove = 1
-- in its delete transaction; deleted once every feed row is written (or
-- removed). A server that dies with fan-out queued leaves its rows
-- here, and the next sweep (at start-up, then every few minutes) redoes them.
CREATE TABLE IF NOT EXISTS feed_outbox (
  pin_id     BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  author_id  BIGINT UNSIGNED NOT NULL,
  sequence   BIGINT NOT NULL,
  created_at DATETIME(6) NOT NULL,
  remove     TINYINT(1) NOT NULL DEFAULT 0,
  KEY by_created (created_at)
) ENGINE=InnoDB
