/**
 * One validator for request shapes, used by services (and so by every path that reaches them:
 * HTTP routes and WebSocket frames alike). Errors become 400 `bad_request` naming each field.
 */
import type { Static, TSchema } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import { badRequest, type FieldErrors } from '../errors.ts'

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>()

/** "/capabilities/0/name" → "capabilities[0].name"; the root is "body". */
export function fieldName(pointer: string, root = 'body'): string {
  if (!pointer || pointer === '/') return root
  return pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '')
}

/** Collects TypeBox errors as field → message, first message per field wins. */
export function collectFieldErrors(errors: Iterable<{ path: string; message: string }>, root?: string): FieldErrors {
  const fields: FieldErrors = {}
  for (const e of errors) {
    const name = fieldName(e.path, root)
    fields[name] ??= e.message
  }
  return fields
}

/** Returns the value typed by the schema, or throws 400 with every offending field in `details`. */
export function validate<T extends TSchema>(schema: T, value: unknown, what = 'request body'): Static<T> {
  let check = compiled.get(schema)
  if (!check) compiled.set(schema, (check = TypeCompiler.Compile(schema)))
  if (check.Check(value)) return value as Static<T>
  throw badRequest(`Invalid ${what}`, collectFieldErrors(check.Errors(value)))
}

/** Serialized size in UTF-8 bytes of a JSON value. */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '')

/** True for a plain JSON object (not an array, not null). */
export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)
