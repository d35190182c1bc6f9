-- The global unique index of usernames, mod-sharded: the row of a name
-- lives on the shard its key hashes to (store: usernameShard), whatever
-- shard the user is on. name_key is the name in lower case (usernames are
-- ASCII letters, digits, '_', '.', '-'), so Ann and ann are one name. A
-- row is only a claim: it counts when user_id is a live user of that name
-- (a rename or a delete that died half-way leaves rows that no longer
-- count, and anyone may take them over).
CREATE TABLE IF NOT EXISTS usernames (
  name_key   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  user_id    BIGINT UNSIGNED NOT NULL,
  claimed_at DATETIME(6) NOT NULL
) ENGINE=InnoDB
;
-- Users created but not yet visible: a new user is inserted inactive with
-- a row here (same shard, same transaction), then claims its name, then
-- is made active and the row deleted. A server that dies in between
-- leaves the row, and a sweep finishes the user (its claim holds) or drops
-- it (it does not).
CREATE TABLE IF NOT EXISTS user_claims (
  user_id    BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  name_key   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  created_at DATETIME(6) NOT NULL,
  KEY by_created (created_at)
) ENGINE=InnoDB
;
-- Lists whose order was chosen by hand (a board whose pins were moved):
-- their sequences are no longer times, so a time range does not apply.
CREATE TABLE IF NOT EXISTS hand_ordered (
  from_id BIGINT UNSIGNED NOT NULL,
  mapping TINYINT UNSIGNED NOT NULL,
  PRIMARY KEY (from_id, mapping)
) ENGINE=InnoDB
