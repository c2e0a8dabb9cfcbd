/**
 * The SQL migrations embedded into the binary as text. Add a line here for every file drizzle-kit
 * generates; a test checks this list against migrations/sqlite/meta/_journal.json.
 */
import journal from '../../../migrations/sqlite/meta/_journal.json'
import m0000 from '../../../migrations/sqlite/0000_init.sql' with { type: 'text' }
import m0001 from '../../../migrations/sqlite/0001_discovery_index.sql' with { type: 'text' }
import m0002 from '../../../migrations/sqlite/0002_discovery_listing.sql' with { type: 'text' }
import m0003 from '../../../migrations/sqlite/0003_discovery_triggers.sql' with { type: 'text' }
import m0004 from '../../../migrations/sqlite/0004_replay_log.sql' with { type: 'text' }
import m0005 from '../../../migrations/sqlite/0005_messages_expiry_order.sql' with { type: 'text' }
import m0006 from '../../../migrations/sqlite/0006_blob_contents_admission.sql' with { type: 'text' }
import m0007 from '../../../migrations/sqlite/0007_messages_lean_indexes.sql' with { type: 'text' }

export const MIGRATION_SQL: Record<string, string> = {
  '0000_init': m0000,
  '0001_discovery_index': m0001,
  '0002_discovery_listing': m0002,
  '0003_discovery_triggers': m0003,
  '0004_replay_log': m0004,
  '0005_messages_expiry_order': m0005,
  '0006_blob_contents_admission': m0006,
  '0007_messages_lean_indexes': m0007,
}

export const MIGRATION_JOURNAL: { entries: { idx: number; when: number; tag: string }[] } = journal
