-- Pairs of a mapping with an inverse (a follow, a like) whose inverse side,
-- on another shard, is not known to match the forward side. Written in the
-- forward side's transaction, on its shard, before the forward row is
-- touched; deleted by the transaction that settles the pair (makes the
-- inverse, and a follow's feed rows, match the forward row) while holding
-- this row's lock. Every writer of a forward row takes this lock first, so
-- a settle sees a forward row no one can change under it. A server that
-- dies between the two sides leaves the row here, and any server's sweep
-- settles it within seconds. A row with to_id 0 (no pair has it) marks a
-- list of a deleted object that is still to be emptied (a pin's likers, a
-- user's follows, likes and boards): written by the delete's transaction,
-- deleted once the list is empty.
CREATE TABLE IF NOT EXISTS pair_outbox (
  mapping    TINYINT UNSIGNED NOT NULL,
  from_id    BIGINT UNSIGNED NOT NULL,
  to_id      BIGINT UNSIGNED NOT NULL,
  created_at DATETIME(6) NOT NULL,
  PRIMARY KEY (mapping, from_id, to_id),
  KEY by_created (created_at)
) ENGINE=InnoDB
