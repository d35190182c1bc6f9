-- Board sections. A section is an object of its own (type 5) on its
-- board's shard, so a board, its sections and its pins share one
-- database and every change among them is one transaction. Its flags
-- column is derived as every object table's (0013_object_flags.sql).
CREATE TABLE IF NOT EXISTS sections (
  local_id   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  doc        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL CHECK (JSON_VALID(doc)),
  version    BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  flags      TINYINT UNSIGNED AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
) ENGINE=InnoDB
;
-- board_sections: a board's sections in the order its owner sets (a new
-- one goes last; moving one gives it a sequence between its neighbours).
-- section_pins: the pins of a section; a pin's document names the one
-- section it is in.
CREATE TABLE IF NOT EXISTS board_sections (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS section_pins (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
