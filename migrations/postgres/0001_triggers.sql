-- Keys that order lists compare byte by byte, as in SQLite (BINARY), whatever the database's locale:
-- public keys, message ids, tags and search words.
ALTER TABLE "agents" ALTER COLUMN "public_key" TYPE text COLLATE "C";
--> statement-breakpoint
ALTER TABLE "agent_tags" ALTER COLUMN "public_key" TYPE text COLLATE "C", ALTER COLUMN "tag" TYPE text COLLATE "C";
--> statement-breakpoint
ALTER TABLE "agent_words" ALTER COLUMN "public_key" TYPE text COLLATE "C", ALTER COLUMN "word" TYPE text COLLATE "C";
--> statement-breakpoint
ALTER TABLE "tag_counts" ALTER COLUMN "tag" TYPE text COLLATE "C";
--> statement-breakpoint
ALTER TABLE "messages" ALTER COLUMN "message_id" TYPE text COLLATE "C";
--> statement-breakpoint
ALTER TABLE "message_blobs" ALTER COLUMN "message_id" TYPE text COLLATE "C";
--> statement-breakpoint
ALTER TABLE "admitted_keys" ALTER COLUMN "public_key" TYPE text COLLATE "C";
--> statement-breakpoint
-- Discovery index maintenance, inside the transaction of the change that causes it (as SQLite's
-- migrations/sqlite/0003): agent_tags holds one row per (agent, tag) with copies of `listed` (public and
-- active) and last_active_at; tag_counts holds the listed agents per tag. The agent store writes the
-- agent_tags rows of a capability change (PostgreSQL's JSON functions refuse text with a \u0000
-- escape, which a description may hold); these triggers keep the copies and the counts.
CREATE FUNCTION relay_agents_listing_au() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE agent_tags SET listed = (NEW.visibility = 'public' AND NEW.status = 'active'), last_active_at = NEW.last_active_at
  WHERE public_key = NEW.public_key;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER agents_listing_au AFTER UPDATE OF visibility, status, last_active_at ON agents FOR EACH ROW
  WHEN (OLD.visibility IS DISTINCT FROM NEW.visibility OR OLD.status IS DISTINCT FROM NEW.status OR OLD.last_active_at IS DISTINCT FROM NEW.last_active_at)
  EXECUTE FUNCTION relay_agents_listing_au();
--> statement-breakpoint
CREATE FUNCTION relay_tag_counts_ai() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tag_counts (tag, agent_count) VALUES (NEW.tag, 1)
    ON CONFLICT (tag) DO UPDATE SET agent_count = tag_counts.agent_count + 1;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION relay_tag_counts_ad() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tag_counts SET agent_count = agent_count - 1 WHERE tag = OLD.tag;
  DELETE FROM tag_counts WHERE tag = OLD.tag AND agent_count <= 0;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION relay_tag_counts_au() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tag_counts (tag, agent_count) VALUES (NEW.tag, CASE WHEN NEW.listed THEN 1 ELSE -1 END)
    ON CONFLICT (tag) DO UPDATE SET agent_count = tag_counts.agent_count + excluded.agent_count;
  DELETE FROM tag_counts WHERE tag = NEW.tag AND agent_count <= 0;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER agent_tags_count_ai AFTER INSERT ON agent_tags FOR EACH ROW WHEN (NEW.listed) EXECUTE FUNCTION relay_tag_counts_ai();
--> statement-breakpoint
CREATE TRIGGER agent_tags_count_ad AFTER DELETE ON agent_tags FOR EACH ROW WHEN (OLD.listed) EXECUTE FUNCTION relay_tag_counts_ad();
--> statement-breakpoint
CREATE TRIGGER agent_tags_count_au AFTER UPDATE OF listed ON agent_tags FOR EACH ROW
  WHEN (OLD.listed IS DISTINCT FROM NEW.listed) EXECUTE FUNCTION relay_tag_counts_au();
