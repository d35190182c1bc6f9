-- Each object row carries its flags beside its document (model.Flags):
-- bit 1 when the document's "active" is true, bit 2 when its "secret" is
-- true. The database derives them from the document on every write that
-- sets doc, whichever statement or program writes it and in whatever
-- order the document's fields come, so a read learns whether an object is
-- live or secret without parsing its JSON. On a shard created before the
-- column, adding it computes it for every existing row (the table is
-- rebuilt once); a shard created since has it from 0001, and these
-- statements leave it, as they do when run again.
ALTER TABLE users ADD COLUMN IF NOT EXISTS flags TINYINT UNSIGNED
  AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
;
ALTER TABLE boards ADD COLUMN IF NOT EXISTS flags TINYINT UNSIGNED
  AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
;
ALTER TABLE pins ADD COLUMN IF NOT EXISTS flags TINYINT UNSIGNED
  AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
;
ALTER TABLE comments ADD COLUMN IF NOT EXISTS flags TINYINT UNSIGNED
  AS (IFNULL(JSON_CONTAINS(doc, 'true', '$.active'), 0) | IFNULL(JSON_CONTAINS(doc, 'true', '$.secret'), 0) << 1) PERSISTENT
