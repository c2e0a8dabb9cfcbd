/**
 * One validator for request shapes, used by services (and so by every path that reaches them:
 * HTTP routes and WebSocket frames alike). Errors become 400 `bad_request` naming each field, with a
 * message a person can act on ("must be at most 256 characters (it has 300)", "must be one of public,
 * private"), never the value itself.
 */
import { Kind, type Static, type TSchema } from '@sinclair/typebox'
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler'
import { DefaultErrorFunction, SetErrorFunction, ValueErrorType, type ErrorFunctionParameter } from '@sinclair/typebox/errors'
import { badRequest, type FieldErrors } from '../errors.ts'
import { PROBLEM, textProblem, type TText } from './models/text.ts'

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>()

type AnySchema = TSchema & Record<string, any>

const typeName = (s: AnySchema): string => {
  switch (s[Kind]) {
    case 'Text':
    case 'String':
      return 'a string'
    case 'Integer':
      return 'an integer'
    case 'Number':
      return 'a number'
    case 'Boolean':
      return 'true or false'
    case 'Null':
      return 'null'
    case 'Array':
      return 'an array'
    case 'Object':
    case 'Record':
      return 'an object'
    case 'Literal':
      return JSON.stringify(s.const)
    default:
      return 'a value of another type'
  }
}

function unionProblem(schema: AnySchema, value: unknown): string {
  const variants = schema.anyOf as AnySchema[]
  if (variants.every((v) => v[Kind] === 'Literal')) return `must be one of ${variants.map((v) => String(v.const)).join(', ')}`
  // a nullable text: say what is wrong with the text
  const text = variants.find((v) => v[Kind] === 'Text') as TText | undefined
  if (text && typeof value === 'string') return textProblem(text, value) ?? 'is not valid'
  return `must be ${[...new Set(variants.map(typeName))].join(' or ')}`
}

/** The message for one TypeBox error; falls back to TypeBox's own wording for rare cases. */
export function problemOf(e: ErrorFunctionParameter): string {
  const s = e.schema as AnySchema
  switch (e.errorType) {
    case ValueErrorType.Kind:
      return s[Kind] === 'Text' ? (textProblem(s as TText, e.value) ?? 'is not valid') : DefaultErrorFunction(e)
    case ValueErrorType.String:
      return 'must be a string'
    case ValueErrorType.StringMinLength:
      return s.minLength === 1 ? 'must not be empty' : `must be at least ${s.minLength} characters`
    case ValueErrorType.StringMaxLength:
      return `must be at most ${s.maxLength} characters`
    case ValueErrorType.StringPattern:
      return (s as { [PROBLEM]?: string })[PROBLEM] ?? `must match ${s.pattern}`
    case ValueErrorType.Union:
      return unionProblem(s, e.value)
    case ValueErrorType.Literal:
      return `must be ${JSON.stringify(s.const)}`
    case ValueErrorType.Integer:
      return 'must be an integer'
    case ValueErrorType.Number:
      return 'must be a number'
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.NumberMinimum:
      return `must be at least ${s.minimum}`
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.NumberMaximum:
      return `must be at most ${s.maximum}`
    case ValueErrorType.Boolean:
      return 'must be true or false'
    case ValueErrorType.Null:
      return 'must be null'
    case ValueErrorType.Object:
      return `must be a JSON object ({…}), not ${jsonKind(e.value)}`
    case ValueErrorType.ObjectRequiredProperty:
      return 'is required'
    case ValueErrorType.ObjectAdditionalProperties:
      return 'unknown field'
    case ValueErrorType.Array:
      return 'must be an array'
    case ValueErrorType.ArrayMaxItems:
      return `must have at most ${s.maxItems} items`
    case ValueErrorType.ArrayMinItems:
      return `must have at least ${s.minItems} items`
  }
  return DefaultErrorFunction(e)
}

SetErrorFunction(problemOf)

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

function compiledCheck(schema: TSchema): TypeCheck<TSchema> {
  let check = compiled.get(schema)
  if (!check) compiled.set(schema, (check = TypeCompiler.Compile(schema)))
  return check
}

/**
 * The one leniency rule for bodies (docs/protocol.md, "What the relay ignores"): a copy of `value` holding
 * only the members its schema declares, at every level the schema describes (objects, arrays of them,
 * the object variant of a union), so unknown fields are ignored, never refused and never stored. The
 * copy is built from the schema's names only, so a member named `__proto__`, `constructor` or
 * `toString` is dropped like any other and can never reach a prototype. Free JSON (`Record`,
 * `Unknown`: message bodies, metadata, input schemas) is kept whole.
 */
export function dropUnknown(schema: TSchema, value: unknown): unknown {
  const s = schema as AnySchema
  switch (s[Kind]) {
    case 'Object': {
      if (!isPlainObject(value)) return value
      const out: Record<string, unknown> = {}
      for (const [name, member] of Object.entries(s.properties as Record<string, TSchema>)) {
        if (Object.hasOwn(value, name)) out[name] = dropUnknown(member, value[name])
      }
      return out
    }
    case 'Array':
      return Array.isArray(value) ? value.map((v) => dropUnknown(s.items as TSchema, v)) : value
    case 'Union': {
      const object = (s.anyOf as AnySchema[]).find((v) => v[Kind] === 'Object')
      return object && isPlainObject(value) ? dropUnknown(object, value) : value
    }
    default:
      return value
  }
}

/** Every offending field of `value` against the schema, unknown fields ignored (empty when it conforms). */
export function fieldErrors(schema: TSchema, value: unknown): FieldErrors {
  const check = compiledCheck(schema)
  const known = dropUnknown(schema, value)
  return check.Check(known) ? {} : collectFieldErrors(check.Errors(known))
}

/**
 * Returns the value typed by the schema (a copy without unknown fields), or throws 400 with every
 * offending field in `details`.
 */
export function validate<T extends TSchema>(schema: T, value: unknown, what = 'request body'): Static<T> {
  const check = compiledCheck(schema)
  const known = dropUnknown(schema, value)
  if (check.Check(known)) return known as Static<T>
  throw badRequest(`Invalid ${what}`, collectFieldErrors(check.Errors(known)))
}

/** What a JSON value is, for messages: "null", "an array", "a string"… */
export function jsonKind(v: unknown): string {
  if (v === null) return 'null'
  // the HTTP layer hands a JSON null and an empty body alike as null, and services read both as absent
  if (v === undefined) return 'null or an empty body'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : typeof v === 'string' ? 'a string' : typeof v === 'number' ? 'a number' : typeof v === 'boolean' ? 'true or false' : String(typeof v)
}

/** True for a plain JSON object (not an array, not null). */
export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** A copy of `input` without the members in `names` whose value is `null` (nullable means absent). */
export function withoutNulls(input: unknown, names: readonly string[]): unknown {
  if (!isPlainObject(input) || !names.some((n) => input[n] === null)) return input
  const out: Record<string, unknown> = { ...input }
  for (const n of names) if (out[n] === null) delete out[n]
  return out
}
