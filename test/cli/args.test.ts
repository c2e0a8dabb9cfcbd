import { describe, expect, test } from 'bun:test'
import { parseArgs, UsageError } from '../../src/cli/args.ts'

describe('parseArgs', () => {
  test('flags with values, = form, booleans and positionals', () => {
    const r = parseArgs(['a', '--out', 'f', '--n=3', '--json', 'b'], { known: ['out', 'n'], booleans: ['json'] })
    expect(r.positionals).toEqual(['a', 'b'])
    expect(r.flags).toEqual({ out: 'f', n: '3', json: 'true' })
  })

  test('repeated flags keep every value in lists; flags keeps the last', () => {
    const r = parseArgs(['--tag', 'a', '--tag=b'], { known: ['tag'] })
    expect(r.flags.tag).toBe('b')
    expect(r.lists.tag).toEqual(['a', 'b'])
  })

  test('a public key that starts with a dash is a positional, not a flag', () => {
    const k1 = '-' + 'A'.repeat(42)
    const k2 = '--' + 'b'.repeat(41)
    expect(parseArgs(['suspend', k1, '--reason', 'x'], { known: ['reason'] }).positionals).toEqual(['suspend', k1])
    expect(parseArgs([k2], { known: [] }).positionals).toEqual([k2])
  })

  test('unknown flags and missing values are usage errors', () => {
    expect(() => parseArgs(['--nope'], { known: ['out'] })).toThrow(UsageError)
    expect(() => parseArgs(['--out'], { known: ['out'] })).toThrow(/needs a value/)
    expect(() => parseArgs(['-q'], {})).toThrow(/unknown flag -q/)
  })
})
