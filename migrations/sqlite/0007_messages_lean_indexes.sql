DROP INDEX `messages_sender_idx`;--> statement-breakpoint
DROP INDEX `messages_reply_idx`;--> statement-breakpoint
DROP INDEX `messages_thread_idx`;--> statement-breakpoint
CREATE INDEX `messages_thread_idx` ON `messages` (`thread_id`,`created_at`,`message_id`) WHERE "messages"."thread_id" IS NOT NULL;