/** The agents table's column of each profile field: the same in every backend's schema. */
import type { AgentProfileFields } from '../services/models/records.ts'

export const PROFILE_COLUMNS: Record<keyof AgentProfileFields, string> = {
  displayName: 'display_name',
  visibility: 'visibility',
  inboxPolicy: 'inbox_policy',
  metadata: 'metadata',
  capabilities: 'capabilities',
}
