-- Saves (repins). A saved pin is a pin of its own, on its board's shard,
-- that names the pin it was saved from. The pair is kept like a follow or
-- a like: pin_saved_from (saved pin → source pin, on the saved pin's
-- shard, the forward side, written in the save's own transaction) and
-- pin_saves (source pin → saved pin, on the source's shard, its inverse,
-- settled through pair_outbox).
CREATE TABLE IF NOT EXISTS pin_saved_from (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS pin_saves (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
-- One save of a source pin per board: written in the save's transaction,
-- on the board's shard, deleted with the saved pin. Its primary key makes
-- saving the same pin to the same board twice return the first save, even
-- when the two saves race.
CREATE TABLE IF NOT EXISTS board_saves (
  board_id      BIGINT UNSIGNED NOT NULL,
  source_pin_id BIGINT UNSIGNED NOT NULL,
  saved_pin_id  BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (board_id, source_pin_id),
  KEY by_saved (board_id, saved_pin_id)
) ENGINE=InnoDB
