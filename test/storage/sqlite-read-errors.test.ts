/** Reads outside a unit of work: SQLite's errors reach the services mapped, however the method fails. */
import { describe, expect, test } from 'bun:test'
import { RelayError } from '../../src/errors.ts'
import { readMapped } from '../../src/storage/sqlite/sqlite-storage.ts'

const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
const full = () => Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })

describe('readMapped', () => {
  test('a fulfilled read is handed on as it is', async () => {
    const promise = Promise.resolve(42)
    expect(readMapped(() => promise, [])).toBe(promise)
    expect(await (readMapped(async (a, b) => (a as number) + (b as number), [2, 3]) as Promise<number>)).toBe(5)
    expect(readMapped((x) => x, ['plain'])).toBe('plain')
  })

  test('an async method that failed synchronously: its error mapped (503 for a lock)', async () => {
    const err = await (readMapped(async () => {
      throw busy()
    }, []) as Promise<unknown>).catch((e) => e)
    expect(err).toBeInstanceOf(RelayError)
    expect(err).toMatchObject({ code: 'service_unavailable', status: 503, headers: { 'Retry-After': '1' } })
  })

  test('a method that throws: mapped (507 for a full disk)', () => {
    let caught: unknown
    try {
      readMapped(() => {
        throw full()
      }, [])
    } catch (e) {
      caught = e
    }
    expect(caught).toMatchObject({ code: 'insufficient_storage', status: 507 })
  })

  test('a promise that fails later: mapped; other errors pass through unchanged', async () => {
    const later = readMapped(() => new Promise((_, reject) => setTimeout(() => reject(busy()), 5)), []) as Promise<unknown>
    expect(await later.catch((e) => e)).toMatchObject({ code: 'service_unavailable' })
    const bug = new TypeError('not a driver error')
    expect(await (readMapped(async () => {
      throw bug
    }, []) as Promise<unknown>).catch((e) => e)).toBe(bug)
  })
})
