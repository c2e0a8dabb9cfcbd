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
-- Discovery index maintenance, inside the transaction of the profile change that causes it (as SQLite's
-- migrations/sqlite/0003): agent_tags holds one row per (agent, tag) with copies of `listed` (public and
-- active) and last_active_at; tag_counts holds the listed agents per tag, kept by the agent_tags triggers.
CREATE FUNCTION relay_agent_tags_fill(a agents) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF jsonb_typeof(a.capabilities::jsonb) <> 'array' THEN RETURN; END IF;
  INSERT INTO agent_tags (public_key, tag, listed, last_active_at)
    SELECT DISTINCT a.public_key, lower(t.value #>> '{}'), a.visibility = 'public' AND a.status = 'active', a.last_active_at
    FROM jsonb_array_elements(a.capabilities::jsonb) AS c(value)
      CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(c.value) = 'object' AND jsonb_typeof(c.value -> 'tags') = 'array' THEN c.value -> 'tags' ELSE '[]'::jsonb END) AS t(value)
    WHERE jsonb_typeof(t.value) = 'string'
  ON CONFLICT DO NOTHING;
END $$;
--> statement-breakpoint
CREATE FUNCTION relay_agents_ai() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM relay_agent_tags_fill(NEW);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION relay_agents_tags_au() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM agent_tags WHERE public_key = OLD.public_key;
  PERFORM relay_agent_tags_fill(NEW);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION relay_agents_listing_au() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE agent_tags SET listed = (NEW.visibility = 'public' AND NEW.status = 'active'), last_active_at = NEW.last_active_at
  WHERE public_key = NEW.public_key;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER agents_index_ai AFTER INSERT ON agents FOR EACH ROW EXECUTE FUNCTION relay_agents_ai();
--> statement-breakpoint
CREATE TRIGGER agents_tags_au AFTER UPDATE OF capabilities ON agents FOR EACH ROW
  WHEN (OLD.capabilities IS DISTINCT FROM NEW.capabilities) EXECUTE FUNCTION relay_agents_tags_au();
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
