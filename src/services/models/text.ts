/**
 * Strings as the relay stores them: lengths count characters (Unicode code points, so an emoji is one
 * character, not two UTF-16 units), and text must be well-formed Unicode — an unpaired surrogate
 * (a `\ud800` escape without its partner) cannot be stored and read back unchanged, so it is refused
 * with a 400 naming the field. Free JSON values (message `body` and `metadata`, profile `metadata`,
 * a capability's `input_schema`) are not Text: they are kept exactly as sent, surrogates included.
 *
 * `Text` is a TypeBox type of its own kind, so one schema serves validation, error messages and the
 * OpenAPI document (where it shows as a string with `minLength`/`maxLength` in characters).
 */
import { Kind, TypeRegistry, type TSchema } from '@sinclair/typebox'

export interface TextOptions {
  minChars?: number
  maxChars?: number
  /** A regular expression the whole value must match (anchor it). */
  pattern?: string
  description?: string
  /** What to say when the pattern does not match. */
  problem?: string
}

/** The message for a pattern mismatch; a symbol key, so it stays out of the published JSON Schema. */
export const PROBLEM = Symbol.for('relay.text.problem')

export interface TText extends TSchema {
  [Kind]: 'Text'
  static: string
  type: 'string'
  minLength?: number
  maxLength?: number
  pattern?: string
  [PROBLEM]?: string
}

/** Characters (code points) in `s`; a well-formed surrogate pair counts once. */
export function charCount(s: string): number {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0xdc00 && c <= 0xdfff && i > 0) {
      const p = s.charCodeAt(i - 1)
      if (p >= 0xd800 && p <= 0xdbff) n--
    }
  }
  return n
}

const patterns = new Map<string, RegExp>()
const regex = (p: string): RegExp => {
  let r = patterns.get(p)
  if (!r) patterns.set(p, (r = new RegExp(p, 'u')))
  return r
}

/** What is wrong with `value` as text of this schema, or null when nothing is. */
export function textProblem(schema: Pick<TText, 'minLength' | 'maxLength' | 'pattern' | typeof PROBLEM>, value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string'
  if (!value.isWellFormed()) return 'must be well-formed Unicode (it contains an unpaired surrogate)'
  const { minLength: min, maxLength: max } = schema
  // a string of n UTF-16 units has at most n characters and at least n/2
  if (min !== undefined && (value.length < min || (value.length < 2 * min && charCount(value) < min))) {
    return min === 1 ? 'must not be empty' : `must be at least ${min} characters`
  }
  if (max !== undefined && value.length > max) {
    const chars = charCount(value)
    if (chars > max) return `must be at most ${max} characters (it has ${chars})`
  }
  if (schema.pattern !== undefined && !regex(schema.pattern).test(value)) return schema[PROBLEM] ?? `must match ${schema.pattern}`
  return null
}

TypeRegistry.Set<TText>('Text', (schema, value) => textProblem(schema, value) === null)

/** A string field measured in characters and refused when it is not well-formed Unicode. */
export function Text(opts: TextOptions = {}): TText {
  const schema: Record<string | symbol, unknown> = { [Kind]: 'Text', type: 'string' }
  if (opts.minChars !== undefined) schema.minLength = opts.minChars
  if (opts.maxChars !== undefined) schema.maxLength = opts.maxChars
  if (opts.pattern !== undefined) schema.pattern = opts.pattern
  if (opts.problem !== undefined) schema[PROBLEM] = opts.problem
  if (opts.description !== undefined) schema.description = opts.description
  return schema as unknown as TText
}
