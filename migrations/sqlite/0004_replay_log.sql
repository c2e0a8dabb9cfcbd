CREATE TABLE `replay_log` (
	`id` integer PRIMARY KEY NOT NULL,
	`signature` text NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
DROP TABLE `replay_cache`;