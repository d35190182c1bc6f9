-- Object tables: one JSON document per row. local_id is the 36-bit local part
-- of the object's ID; version counts edits for optimistic concurrency;
-- flags are derived from the document (see 0013_object_flags.sql, which
-- adds them to shards created before they were here).
CREATE TABLE IF NOT EXISTS users (
  local_id   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  doc        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL CHECK (JSON_VALID(doc)),
  version    BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  flags      TINYINT UNSIGNED AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS boards (
  local_id   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  doc        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL CHECK (JSON_VALID(doc)),
  version    BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  flags      TINYINT UNSIGNED AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS pins (
  local_id   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  doc        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL CHECK (JSON_VALID(doc)),
  version    BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  flags      TINYINT UNSIGNED AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS comments (
  local_id   BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  doc        LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL CHECK (JSON_VALID(doc)),
  version    BIGINT UNSIGNED NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  flags      TINYINT UNSIGNED AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
) ENGINE=InnoDB
;
-- Mapping tables: one row per (from, to). The primary key makes an add
-- idempotent; by_sequence makes an ordered page an index range scan.
CREATE TABLE IF NOT EXISTS user_boards (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS board_pins (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS user_pins (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS user_following (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS user_followers (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS user_likes (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS pin_likers (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
CREATE TABLE IF NOT EXISTS pin_comments (
  from_id BIGINT UNSIGNED NOT NULL, to_id BIGINT UNSIGNED NOT NULL, sequence BIGINT NOT NULL,
  PRIMARY KEY (from_id, to_id), KEY by_sequence (from_id, sequence, to_id)
) ENGINE=InnoDB
;
-- Per-mapping list lengths, changed in the same transaction as the row.
CREATE TABLE IF NOT EXISTS mapping_counts (
  from_id BIGINT UNSIGNED NOT NULL,
  mapping TINYINT UNSIGNED NOT NULL,
  n       BIGINT NOT NULL,
  PRIMARY KEY (from_id, mapping)
) ENGINE=InnoDB
