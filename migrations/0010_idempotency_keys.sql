-- Idempotency keys of POST creates (the Idempotency-Key header). A row
-- lives on the shard where its request's forward write happens: a pin's
-- on its board's shard, a board's on its owner's, a comment's on its
-- pin's, a user's on the shard picked from the key (the user is placed
-- there). key_hash is SHA-256 of scope NUL key (scope: who sent it), so a
-- key of any allowed length is a fixed-size primary key; fingerprint is
-- SHA-256 of the request's method, path and body.
--
-- A request claims its key alone (state 0 = pending, a random claim
-- token, claimed_at); its create transaction then sets state 1 = done and
-- the response, on the condition it still holds the claim, so a create
-- and its key's completion commit together. A pending claim older than
-- the lease may be taken over (the claimant died); object_id is a user
-- create's user, recorded before the user's name is claimed so a
-- takeover finishes that user instead of making another. Rows expire at
-- expires_at and a sweep deletes them.
CREATE TABLE IF NOT EXISTS idempotency_keys (
  key_hash    BINARY(32) NOT NULL PRIMARY KEY,
  fingerprint BINARY(32) NOT NULL,
  state       TINYINT UNSIGNED NOT NULL,
  claim       BIGINT UNSIGNED NOT NULL,
  claimed_at  DATETIME(6) NOT NULL,
  object_id   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  response    MEDIUMBLOB NULL,
  expires_at  DATETIME(6) NOT NULL,
  KEY by_expiry (expires_at)
) ENGINE=InnoDB
