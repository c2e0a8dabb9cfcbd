/** The agent record cache of SQLite storage: bounded, least recently used out first, drops honoured. */
import { describe, expect, test } from 'bun:test'
import type { AgentRecord } from '../../src/services/models/records.ts'
import { AgentCache } from '../../src/storage/sqlite/agents-store.ts'

const row = (key: string) => ({ publicKey: key }) as AgentRecord

describe('AgentCache', () => {
  test('holds at most two generations; what was used lately stays, what was not goes', () => {
    const cache = new AgentCache(4)
    for (const k of ['a', 'b', 'c']) cache.set(k, row(k))
    cache.set('d', row('d')) // the young generation is full: a–d become the old one
    expect(cache.size).toBe(4)
    expect(cache.get('a')?.publicKey).toBe('a') // used: back in the young generation
    for (const k of ['e', 'f', 'g']) cache.set(k, row(k)) // a, e, f, g: full again, b–d are dropped
    expect(cache.size).toBe(4)
    expect(cache.get('b')).toBeUndefined()
    expect(cache.get('d')).toBeUndefined()
    for (const k of ['a', 'e', 'f', 'g']) expect(cache.get(k)?.publicKey).toBe(k)
    for (let i = 0; i < 100; i++) cache.set(`k${i}`, row(`k${i}`))
    expect(cache.size).toBeLessThanOrEqual(8)
  })

  test('a drop removes the key from either generation, and a new row replaces an old copy', () => {
    const cache = new AgentCache(2)
    cache.set('a', row('a'))
    cache.set('b', row('b')) // a, b old
    cache.set('c', row('c'))
    cache.drop('a')
    cache.drop('c')
    expect(cache.get('a')).toBeUndefined()
    expect(cache.get('c')).toBeUndefined()
    const fresh = { publicKey: 'b', displayName: 'new' } as AgentRecord
    cache.set('b', fresh)
    cache.set('x', row('x')) // b, x become old
    cache.set('y', row('y'))
    expect(cache.get('b')).toBe(fresh)
  })
})
