import type { Database } from 'bun:sqlite'

/**
 * Removes what SPEC §2.2 lists when an agent is deleted, except the profile row itself: messages
 * addressed to it, ACL entries it owns, its webhook and pending deliveries, and its blobs that no
 * unexpired message references (files go with the blob sweep once no record uses their hash).
 * Runs inside the delete transaction.
 */
export function deleteAgentData(client: Database, publicKey: string, now: number): void {
  client.run('DELETE FROM webhook_deliveries WHERE public_key = ?', [publicKey])
  client.run('DELETE FROM webhooks WHERE public_key = ?', [publicKey])
  client.run('DELETE FROM acl_entries WHERE owner_key = ?', [publicKey])
  client.run('DELETE FROM messages WHERE recipient_key = ?', [publicKey])
  client.run(
    `DELETE FROM blobs WHERE owner_key = ? AND NOT EXISTS (
       SELECT 1 FROM message_blobs mb WHERE mb.blob_id = blobs.blob_id AND mb.expires_at > ?)`,
    [publicKey, now],
  )
}
