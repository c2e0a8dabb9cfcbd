CREATE TABLE `admitted_keys` (
	`public_key` text PRIMARY KEY NOT NULL,
	`note` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `blob_contents` (
	`hash` text PRIMARY KEY NOT NULL,
	`size_bytes` integer NOT NULL,
	`state` text DEFAULT 'live' NOT NULL,
	`claimed_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
-- every content a record names today is live; claimed long ago, so the usual rules apply at once
INSERT INTO `blob_contents` (`hash`, `size_bytes`, `state`, `claimed_at`, `updated_at`)
SELECT `hash`, max(`size_bytes`), 'live', 0, 0 FROM `blobs` GROUP BY `hash`;
