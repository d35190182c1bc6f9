-- The hybrid home feed. feed_pull_authors, on the author's shard: an author
-- whose pins are merged into followers' feeds at read time ("pulled")
-- since the pin at `since` (the first one created while their follower
-- count was at or above the pull threshold). told = 0 until every
-- follower has a feed_pulled row for them (the fan-out's job, redone by
-- the sweep after a crash).
CREATE TABLE IF NOT EXISTS feed_pull_authors (
  author_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  since     BIGINT NOT NULL,
  told      TINYINT(1) NOT NULL DEFAULT 0,
  KEY by_told (told)
) ENGINE=InnoDB
;
-- feed_pulled, on the follower's shard: the pulled authors a user follows,
-- whose own pin lists a feed page merges with user_feed. Written by the
-- follow (or the author's transition job) under the follow row's lock,
-- deleted by the unfollow's forward transaction.
CREATE TABLE IF NOT EXISTS feed_pulled (
  from_id   BIGINT UNSIGNED NOT NULL,
  author_id BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (from_id, author_id)
) ENGINE=InnoDB
