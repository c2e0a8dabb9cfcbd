-- Discovery indexes kept in sync by triggers, so every profile change updates them in the same
-- transaction (SPEC §3). agent_tags holds one row per (agent, tag); agents_fts indexes display names,
-- capability names and descriptions for prefix-word search.
CREATE VIRTUAL TABLE `agents_fts` USING fts5(`display_name`, `capability_text`, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');
--> statement-breakpoint
CREATE TRIGGER `agents_index_ai` AFTER INSERT ON `agents` BEGIN
  INSERT INTO `agents_fts`(rowid, `display_name`, `capability_text`) VALUES (
    NEW.rowid,
    ifnull(NEW.display_name, ''),
    (SELECT ifnull(group_concat(ifnull(json_extract(c.value, '$.name'), '') || ' ' || ifnull(json_extract(c.value, '$.description'), ''), ' '), '') FROM json_each(NEW.capabilities) AS c)
  );
  INSERT OR IGNORE INTO `agent_tags`(`public_key`, `tag`)
    SELECT NEW.public_key, t.value FROM json_each(NEW.capabilities) AS c, json_each(json_extract(c.value, '$.tags')) AS t
    WHERE json_type(c.value, '$.tags') = 'array';
END;
--> statement-breakpoint
CREATE TRIGGER `agents_index_au` AFTER UPDATE OF `display_name`, `capabilities` ON `agents` BEGIN
  DELETE FROM `agents_fts` WHERE rowid = OLD.rowid;
  INSERT INTO `agents_fts`(rowid, `display_name`, `capability_text`) VALUES (
    NEW.rowid,
    ifnull(NEW.display_name, ''),
    (SELECT ifnull(group_concat(ifnull(json_extract(c.value, '$.name'), '') || ' ' || ifnull(json_extract(c.value, '$.description'), ''), ' '), '') FROM json_each(NEW.capabilities) AS c)
  );
  DELETE FROM `agent_tags` WHERE `public_key` = OLD.public_key;
  INSERT OR IGNORE INTO `agent_tags`(`public_key`, `tag`)
    SELECT NEW.public_key, t.value FROM json_each(NEW.capabilities) AS c, json_each(json_extract(c.value, '$.tags')) AS t
    WHERE json_type(c.value, '$.tags') = 'array';
END;
--> statement-breakpoint
CREATE TRIGGER `agents_index_ad` AFTER DELETE ON `agents` BEGIN
  DELETE FROM `agents_fts` WHERE rowid = OLD.rowid;
END;
