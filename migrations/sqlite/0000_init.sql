CREATE TABLE `acl_entries` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`owner_key` text NOT NULL,
	`peer_key` text NOT NULL,
	`entry_type` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `acl_owner_peer_idx` ON `acl_entries` (`owner_key`,`peer_key`);--> statement-breakpoint
CREATE INDEX `acl_owner_created_idx` ON `acl_entries` (`owner_key`,`id`);--> statement-breakpoint
CREATE TABLE `agent_tags` (
	`public_key` text NOT NULL,
	`tag` text NOT NULL,
	PRIMARY KEY(`public_key`, `tag`),
	FOREIGN KEY (`public_key`) REFERENCES `agents`(`public_key`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `agent_tags_tag_idx` ON `agent_tags` (`tag`,`public_key`);--> statement-breakpoint
CREATE TABLE `agents` (
	`public_key` text PRIMARY KEY NOT NULL,
	`display_name` text,
	`status` text DEFAULT 'active' NOT NULL,
	`suspended_reason` text,
	`visibility` text DEFAULT 'private' NOT NULL,
	`inbox_policy` text DEFAULT 'blocklist' NOT NULL,
	`metadata` text DEFAULT '{}' NOT NULL,
	`capabilities` text DEFAULT '[]' NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`last_active_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `agents_discover_idx` ON `agents` (`visibility`,`status`,`last_active_at`,`public_key`);--> statement-breakpoint
CREATE INDEX `agents_updated_idx` ON `agents` (`updated_at`);--> statement-breakpoint
CREATE TABLE `blobs` (
	`blob_id` text PRIMARY KEY NOT NULL,
	`owner_key` text NOT NULL,
	`hash` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`content_type` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `blobs_owner_hash_idx` ON `blobs` (`owner_key`,`hash`);--> statement-breakpoint
CREATE INDEX `blobs_hash_idx` ON `blobs` (`hash`);--> statement-breakpoint
CREATE INDEX `blobs_expires_idx` ON `blobs` (`expires_at`);--> statement-breakpoint
CREATE TABLE `message_blobs` (
	`message_id` text NOT NULL,
	`blob_id` text NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`message_id`, `blob_id`),
	FOREIGN KEY (`message_id`) REFERENCES `messages`(`message_id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `message_blobs_blob_idx` ON `message_blobs` (`blob_id`,`expires_at`);--> statement-breakpoint
CREATE TABLE `messages` (
	`message_id` text PRIMARY KEY NOT NULL,
	`sender_key` text NOT NULL,
	`recipient_key` text NOT NULL,
	`content_type` text NOT NULL,
	`body` text,
	`attachments` text,
	`thread_id` text,
	`in_reply_to` text,
	`metadata` text,
	`status` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`delivered_at` integer
);
--> statement-breakpoint
CREATE INDEX `messages_inbox_idx` ON `messages` (`recipient_key`,`status`,`created_at`,`message_id`);--> statement-breakpoint
CREATE INDEX `messages_thread_idx` ON `messages` (`thread_id`,`created_at`,`message_id`);--> statement-breakpoint
CREATE INDEX `messages_sender_idx` ON `messages` (`sender_key`,`created_at`);--> statement-breakpoint
CREATE INDEX `messages_reply_idx` ON `messages` (`in_reply_to`);--> statement-breakpoint
CREATE INDEX `messages_expiry_idx` ON `messages` (`status`,`expires_at`);--> statement-breakpoint
CREATE TABLE `relay_state` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `replay_cache` (
	`signature` text PRIMARY KEY NOT NULL,
	`public_key` text NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `replay_cache_expires_idx` ON `replay_cache` (`expires_at`);--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`delivery_id` text PRIMARY KEY NOT NULL,
	`public_key` text NOT NULL,
	`message_id` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`state` text NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_deliveries_message_idx` ON `webhook_deliveries` (`message_id`,`public_key`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_due_idx` ON `webhook_deliveries` (`state`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_agent_idx` ON `webhook_deliveries` (`public_key`);--> statement-breakpoint
CREATE TABLE `webhooks` (
	`public_key` text PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`secret` text NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`consecutive_failures` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
