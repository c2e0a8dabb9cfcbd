DROP INDEX `messages_expiry_idx`;--> statement-breakpoint
CREATE INDEX `messages_expires_idx` ON `messages` (`expires_at`);