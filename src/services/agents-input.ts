/**
 * The body of a profile PATCH turned into the fields to store, with every limit a profile has.
 *
 * - `null`: `display_name: null` removes the display name; `null` for `visibility`, `inbox_policy`,
 *   `metadata` or `capabilities` leaves that field unchanged (clients that serialize every optional
 *   field as null must not wipe what they did not mean to touch; send `{}` or `[]` to clear).
 * - A capability given as a plain string (older MRP clients) is a capability with that name, tagged
 *   with it (lower-cased) when the name is a valid tag; a name that is not a valid tag gets no tag and
 *   is still found by full-text search.
 * - `metadata` is stored as the exact text sent, and capabilities keep every number as written (an
 *   `input_schema` with `9007199254740993` or `1.0` reads back the same).
 * - Unknown fields, at the top and inside a capability, are ignored (the one leniency rule of
 *   validate.ts), and `null` for a capability's optional `description`, `tags`, `input_schema` or
 *   `version` is the same as leaving it out.
 */
import { Type as T, type TSchema } from '@sinclair/typebox'
import { badRequest, type FieldErrors } from '../errors.ts'
import { parseExact, rawMemberText } from '../lib/json-text.ts'
import type { AgentProfileFields } from './models/records.ts'
import { AgentPatch, Capability, TAG_PATTERN_TEXT } from './models/agent.ts'
import { Text, textProblem } from './models/text.ts'
import { dropUnknown, fieldErrors, isPlainObject, withoutNulls } from './validate.ts'

/** Profile metadata and each input_schema: at most 16 KiB serialized. */
export const MAX_PROFILE_JSON_BYTES = 16 * 1024

const NULL_MEANS_UNCHANGED = ['visibility', 'inbox_policy', 'metadata', 'capabilities'] as const
/** A capability's optional members: `null` means absent. */
const CAPABILITY_OPTIONAL = ['description', 'tags', 'input_schema', 'version'] as const
const CAPABILITY_NAME = Text({ minChars: 1, maxChars: 128 })
const TAG = new RegExp(TAG_PATTERN_TEXT)

interface CapabilityIn {
  name: string
  description?: string
  tags?: string[]
  input_schema?: Record<string, unknown>
  version?: string
}

/**
 * Capabilities given as strings become objects; a string that is no usable name is reported. Objects
 * keep only the members a capability has, without the optional ones given as `null`.
 */
function expandCapabilities(list: unknown[], fields: FieldErrors): unknown[] {
  return list.map((cap, i) => {
    if (typeof cap !== 'string') return dropUnknown(Capability, withoutNulls(cap, CAPABILITY_OPTIONAL))
    const problem = textProblem(CAPABILITY_NAME, cap)
    if (problem) {
      fields[`capabilities[${i}]`] = problem
      return { name: 'x' } // placeholder so the schema check reports nothing more for this entry
    }
    return TAG.test(cap) ? { name: cap, tags: [cap] } : { name: cap }
  })
}

/** The rules a schema cannot express (unique names, input_schema size), and lower-cased, distinct tags. */
function checkCapabilities(caps: CapabilityIn[], fields: FieldErrors): CapabilityIn[] {
  const seen = new Set<string>()
  return caps.map((cap, i) => {
    if (seen.has(cap.name)) fields[`capabilities[${i}].name`] ??= `duplicate capability name "${cap.name}"`
    seen.add(cap.name)
    if (cap.input_schema !== undefined && Buffer.byteLength(JSON.stringify(cap.input_schema)) > MAX_PROFILE_JSON_BYTES) {
      fields[`capabilities[${i}].input_schema`] = 'must be at most 16 KiB serialized'
    }
    if (cap.tags === undefined) return cap
    return { ...cap, tags: [...new Set(cap.tags.map((t) => t.toLowerCase()))] }
  })
}

/** The body of `POST /v1/agents/me/capabilities` once a bare array became `{capabilities}`: the list is required. */
export const CapabilitiesBody = T.Object({ capabilities: T.Array(Capability, { maxItems: 20 }) }, { additionalProperties: false })

/**
 * The capabilities of `POST /v1/agents/{publicKey}/capabilities` (MRP's way to set them): `{capabilities:
 * [...]}` or the bare array, with the same rules as `capabilities` in a PATCH. Returns the JSON text to store.
 */
export function parseCapabilitiesBody(body: unknown): string {
  const update = Array.isArray(body) ? parseAgentPatch({ capabilities: body }, CapabilitiesBody) : parseAgentPatch(body ?? {}, CapabilitiesBody)
  return update.capabilities as string
}

/**
 * The profile fields a PATCH body changes; throws 400 naming every offending field. `schema` narrows
 * the fields taken (the capabilities endpoint takes only `capabilities`, and requires it).
 */
export function parseAgentPatch(body: unknown, schema: TSchema = AgentPatch): AgentProfileFields {
  const input = dropUnknown(schema, withoutNulls(body ?? {}, NULL_MEANS_UNCHANGED))
  const fields: FieldErrors = {}
  let candidate = input
  if (isPlainObject(input) && Array.isArray(input.capabilities)) {
    // numbers inside capabilities keep their digits: read them from the text as sent when there is one
    const text = rawMemberText(body, 'capabilities')
    const exact = text === undefined ? input.capabilities : (parseExact(text) as unknown[])
    candidate = { ...input, capabilities: expandCapabilities(exact, fields) }
  }
  Object.assign(fields, { ...fieldErrors(schema, candidate), ...fields })
  if (Object.keys(fields).length) throw badRequest('Invalid request body', fields)

  const patch = candidate as { display_name?: string | null; visibility?: 'public' | 'private'; inbox_policy?: AgentProfileFields['inboxPolicy']; metadata?: Record<string, unknown>; capabilities?: CapabilityIn[] }
  const update: AgentProfileFields = {}
  if (patch.display_name !== undefined) update.displayName = patch.display_name
  if (patch.visibility !== undefined) update.visibility = patch.visibility
  if (patch.inbox_policy !== undefined) update.inboxPolicy = patch.inbox_policy
  if (patch.metadata !== undefined) {
    const text = rawMemberText(body, 'metadata') ?? JSON.stringify(patch.metadata)
    if (Buffer.byteLength(text) > MAX_PROFILE_JSON_BYTES) fields.metadata = 'must be at most 16 KiB serialized'
    update.metadata = text
  }
  if (patch.capabilities !== undefined) update.capabilities = JSON.stringify(checkCapabilities(patch.capabilities, fields))
  if (Object.keys(fields).length) throw badRequest('Invalid request body', fields)
  return update
}
