/** Ids from the pooled CSPRNG: the documented shapes, and no repeats across pool refills. */
import { expect, test } from 'bun:test'
import { BLOB_ID_PATTERN, MESSAGE_ID_PATTERN, newBlobId, newDeliveryId, newMessageId, newRequestId, randomHex } from '../../src/lib/ids.ts'

test('ids have their documented shapes', () => {
  expect(newMessageId(1_700_000_123_456)).toMatch(/^msg_1700000123_[0-9a-f]{12}$/)
  expect(newMessageId(Date.now())).toMatch(MESSAGE_ID_PATTERN)
  expect(newBlobId()).toMatch(BLOB_ID_PATTERN)
  expect(newRequestId()).toMatch(/^req_[0-9a-f]{16}$/)
  expect(newDeliveryId()).toMatch(/^dlv_[0-9a-f]{24}$/)
  for (const n of [1, 5, 12, 31]) expect(randomHex(n)).toMatch(new RegExp(`^[0-9a-f]{${n}}$`))
})

test('no id repeats across many refills of the pool, and every hex digit is used evenly', () => {
  const seen = new Set<string>()
  const counts = new Map<string, number>()
  for (let i = 0; i < 50_000; i++) {
    const id = randomHex(16) // 8 bytes: the 4 KiB pool is refilled ~100 times
    seen.add(id)
    for (const c of id) counts.set(c, (counts.get(c) ?? 0) + 1)
  }
  expect(seen.size).toBe(50_000)
  expect(counts.size).toBe(16)
  const expected = (50_000 * 16) / 16
  for (const n of counts.values()) expect(Math.abs(n - expected) / expected).toBeLessThan(0.02)
})
