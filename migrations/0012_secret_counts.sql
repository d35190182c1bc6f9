-- A user's counts of secret boards and of pins on them, beside the
-- lengths of user_boards and user_pins, under the mapping key with the
-- high bit set (model.SecretKey: 129 for user_boards, 131 for user_pins).
-- From here on the transactions that create, delete or flip a board or
-- pin keep them; these statements count what exists (a user, their boards
-- and their pins share this shard). Run again, they count again.
INSERT INTO mapping_counts (from_id, mapping, n)
SELECT e.from_id, 129, COUNT(*) FROM user_boards e
  JOIN boards o ON o.local_id = e.to_id & 68719476735
 WHERE JSON_CONTAINS(o.doc, 'true', '$.secret')
 GROUP BY e.from_id
ON DUPLICATE KEY UPDATE n = VALUES(n)
;
INSERT INTO mapping_counts (from_id, mapping, n)
SELECT e.from_id, 131, COUNT(*) FROM user_pins e
  JOIN pins o ON o.local_id = e.to_id & 68719476735
 WHERE JSON_CONTAINS(o.doc, 'true', '$.secret')
 GROUP BY e.from_id
ON DUPLICATE KEY UPDATE n = VALUES(n)
