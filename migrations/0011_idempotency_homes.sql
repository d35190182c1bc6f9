-- Idempotency keys by their home shard. A key's claim lives on the shard
-- picked from a hash of (scope, key), its home, wherever its create
-- writes, so a second use of the key with any request on any POST route
-- meets the same row. key_hash is SHA-256 of scope NUL key; fingerprint
-- is SHA-256 of the request's method, path and body; target is the shard
-- the create writes to (-1: a request that creates nothing used the key).
--
-- A request claims its key alone on its home (state 0 = pending, a
-- random claim token, claimed_at); the create's own transaction, on the
-- target shard, inserts the outcome row (key_hash, claim) with the
-- response, so a create and its response commit together, or neither
-- does. A retry reads the home row, then the target's outcome of its
-- claim: a done outcome is replayed; none, within the lease, is a request
-- still running; none past the lease is fenced (an outcome row of state 2
-- that the slow claimant's insert then collides with) before the retry
-- takes the claim over. A user create notes its user (state 3) before the
-- name is claimed, so a takeover finishes that user instead of making
-- another. Rows expire at expires_at and a sweep deletes them.
--
-- idempotency_keys (0010) kept a key on its create's shard; it is no
-- longer written, and a later migration drops it.
CREATE TABLE IF NOT EXISTS idempotency_claims (
  key_hash    BINARY(32) NOT NULL PRIMARY KEY,
  fingerprint BINARY(32) NOT NULL,
  state       TINYINT UNSIGNED NOT NULL,
  claim       BIGINT UNSIGNED NOT NULL,
  claimed_at  DATETIME(6) NOT NULL,
  target      INT NOT NULL,
  expires_at  DATETIME(6) NOT NULL,
  KEY by_expiry (expires_at)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS idempotency_outcomes (
  key_hash   BINARY(32) NOT NULL,
  claim      BIGINT UNSIGNED NOT NULL,
  state      TINYINT UNSIGNED NOT NULL,
  object_id  BIGINT UNSIGNED NOT NULL DEFAULT 0,
  response   MEDIUMBLOB NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (key_hash, claim),
  KEY by_expiry (expires_at)
) ENGINE=InnoDB
