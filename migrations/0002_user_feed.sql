-- The materialised home feed: one row per (follower, pin of a followee),
-- on the follower's shard, written when the pin is created (fan-out on
-- write) and when the follow is made. by_sequence pages it like any list;
-- by_author drops a followee's pins on unfollow.
CREATE TABLE IF NOT EXISTS user_feed (
  from_id   BIGINT UNSIGNED NOT NULL,
  to_id     BIGINT UNSIGNED NOT NULL,
  sequence  BIGINT NOT NULL,
  author_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (from_id, to_id),
  KEY by_sequence (from_id, sequence, to_id),
  KEY by_author (from_id, author_id)
) ENGINE=InnoDB
