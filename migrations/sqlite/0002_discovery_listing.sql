CREATE TABLE `tag_counts` (
	`tag` text PRIMARY KEY NOT NULL,
	`agent_count` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `tag_counts_rank_idx` ON `tag_counts` ("agent_count" desc,`tag`);--> statement-breakpoint
DROP INDEX `agent_tags_tag_idx`;--> statement-breakpoint
ALTER TABLE `agent_tags` ADD `listed` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `agent_tags` ADD `last_active_at` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `agent_tags_listing_idx` ON `agent_tags` (`tag`,`listed`,"last_active_at" desc,`public_key`);--> statement-breakpoint
DROP INDEX `agents_discover_idx`;--> statement-breakpoint
CREATE INDEX `agents_discover_idx` ON `agents` (`visibility`,`status`,"last_active_at" desc,`public_key`,`display_name`);