CREATE TABLE "acl_entries" (
	"id" serial PRIMARY KEY NOT NULL,
	"owner_key" text NOT NULL,
	"peer_key" text NOT NULL,
	"entry_type" text NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "admitted_keys" (
	"public_key" text PRIMARY KEY NOT NULL,
	"note" text,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "agent_tags" (
	"public_key" text NOT NULL,
	"tag" text NOT NULL,
	"listed" boolean DEFAULT false NOT NULL,
	"last_active_at" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "agent_tags_public_key_tag_pk" PRIMARY KEY("public_key","tag")
);
--> statement-breakpoint
CREATE TABLE "agent_words" (
	"public_key" text NOT NULL,
	"word" text NOT NULL,
	CONSTRAINT "agent_words_public_key_word_pk" PRIMARY KEY("public_key","word")
);
--> statement-breakpoint
CREATE TABLE "agents" (
	"public_key" text PRIMARY KEY NOT NULL,
	"display_name" text,
	"status" text DEFAULT 'active' NOT NULL,
	"suspended_reason" text,
	"visibility" text DEFAULT 'private' NOT NULL,
	"inbox_policy" text DEFAULT 'blocklist' NOT NULL,
	"metadata" text DEFAULT '{}' NOT NULL,
	"capabilities" text DEFAULT '[]' NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"last_active_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "blob_contents" (
	"hash" text PRIMARY KEY NOT NULL,
	"size_bytes" bigint NOT NULL,
	"state" text DEFAULT 'live' NOT NULL,
	"claimed_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "blobs" (
	"blob_id" text PRIMARY KEY NOT NULL,
	"owner_key" text NOT NULL,
	"hash" text NOT NULL,
	"size_bytes" bigint NOT NULL,
	"content_type" text NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "message_blobs" (
	"message_id" text NOT NULL,
	"blob_id" text NOT NULL,
	"expires_at" bigint NOT NULL,
	CONSTRAINT "message_blobs_message_id_blob_id_pk" PRIMARY KEY("message_id","blob_id")
);
--> statement-breakpoint
CREATE TABLE "messages" (
	"message_id" text PRIMARY KEY NOT NULL,
	"sender_key" text NOT NULL,
	"recipient_key" text NOT NULL,
	"content_type" text NOT NULL,
	"body" text,
	"attachments" text,
	"thread_id" text,
	"in_reply_to" text,
	"metadata" text,
	"status" text NOT NULL,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	"delivered_at" bigint
);
--> statement-breakpoint
CREATE TABLE "rate_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"bucket" text NOT NULL,
	"at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "relay_state" (
	"key" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "replay_log" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"signature" text NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tag_counts" (
	"tag" text PRIMARY KEY NOT NULL,
	"agent_count" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"delivery_id" text PRIMARY KEY NOT NULL,
	"public_key" text NOT NULL,
	"message_id" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"state" text NOT NULL,
	"next_attempt_at" bigint NOT NULL,
	"last_error" text,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhooks" (
	"public_key" text PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"secret" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ws_connections" (
	"public_key" text NOT NULL,
	"connection_id" text NOT NULL,
	"instance_id" text NOT NULL,
	"heartbeat_at" bigint NOT NULL,
	CONSTRAINT "ws_connections_public_key_connection_id_pk" PRIMARY KEY("public_key","connection_id")
);
--> statement-breakpoint
ALTER TABLE "agent_tags" ADD CONSTRAINT "agent_tags_public_key_agents_public_key_fk" FOREIGN KEY ("public_key") REFERENCES "public"."agents"("public_key") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_words" ADD CONSTRAINT "agent_words_public_key_agents_public_key_fk" FOREIGN KEY ("public_key") REFERENCES "public"."agents"("public_key") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "message_blobs" ADD CONSTRAINT "message_blobs_message_id_messages_message_id_fk" FOREIGN KEY ("message_id") REFERENCES "public"."messages"("message_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "acl_owner_peer_idx" ON "acl_entries" USING btree ("owner_key","peer_key");--> statement-breakpoint
CREATE INDEX "acl_owner_created_idx" ON "acl_entries" USING btree ("owner_key","id");--> statement-breakpoint
CREATE INDEX "agent_tags_listing_idx" ON "agent_tags" USING btree ("tag","listed","last_active_at" desc,"public_key");--> statement-breakpoint
CREATE INDEX "agent_words_word_idx" ON "agent_words" USING btree ("word","public_key");--> statement-breakpoint
CREATE INDEX "agents_discover_idx" ON "agents" USING btree ("visibility","status","last_active_at" desc,"public_key");--> statement-breakpoint
CREATE INDEX "agents_updated_idx" ON "agents" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "blobs_owner_hash_idx" ON "blobs" USING btree ("owner_key","hash");--> statement-breakpoint
CREATE INDEX "blobs_hash_idx" ON "blobs" USING btree ("hash");--> statement-breakpoint
CREATE INDEX "blobs_expires_idx" ON "blobs" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "message_blobs_blob_idx" ON "message_blobs" USING btree ("blob_id","expires_at");--> statement-breakpoint
CREATE INDEX "messages_inbox_idx" ON "messages" USING btree ("recipient_key","status","created_at","message_id");--> statement-breakpoint
CREATE INDEX "messages_thread_idx" ON "messages" USING btree ("thread_id","created_at","message_id");--> statement-breakpoint
CREATE INDEX "messages_sender_idx" ON "messages" USING btree ("sender_key","created_at");--> statement-breakpoint
CREATE INDEX "messages_reply_idx" ON "messages" USING btree ("in_reply_to");--> statement-breakpoint
CREATE INDEX "messages_expires_idx" ON "messages" USING btree ("expires_at","message_id");--> statement-breakpoint
CREATE INDEX "rate_events_bucket_idx" ON "rate_events" USING btree ("bucket","at");--> statement-breakpoint
CREATE UNIQUE INDEX "replay_log_signature_idx" ON "replay_log" USING btree ("signature");--> statement-breakpoint
CREATE INDEX "replay_log_expires_idx" ON "replay_log" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "tag_counts_rank_idx" ON "tag_counts" USING btree ("agent_count" desc,"tag");--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_deliveries_message_idx" ON "webhook_deliveries" USING btree ("message_id","public_key");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("state","next_attempt_at");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_agent_idx" ON "webhook_deliveries" USING btree ("public_key");--> statement-breakpoint
CREATE INDEX "ws_connections_instance_idx" ON "ws_connections" USING btree ("instance_id");