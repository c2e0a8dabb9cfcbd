/** A relay stopped in process lets go of its database files at once, not when the collector runs. */
import { expect, test } from 'bun:test'
import { existsSync, readdirSync, readlinkSync } from 'node:fs'
import { startTestRelay } from '../support/harness.ts'

/** Files of `dir` this process holds open (Linux: /proc/self/fd). */
function openFilesIn(dir: string): string[] {
  return readdirSync('/proc/self/fd')
    .map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`)
      } catch {
        return ''
      }
    })
    .filter((target) => target.startsWith(dir))
}

test.skipIf(!existsSync('/proc/self/fd'))('stop() closes relay.db, its WAL and shared memory', async () => {
  const t = await startTestRelay({ rateLimits: { sendPerMin: 0, pollPerMin: 0, requestsPerMin: 0 } })
  const [a, b] = [t.client(), t.client()]
  await a.getAgent()
  await b.getAgent()
  for (let i = 0; i < 20; i++) await a.send({ recipient_key: b.publicKey, body: { i } })
  expect((await b.poll()).messages).toHaveLength(20)
  expect(openFilesIn(t.dataDir).some((f) => f.endsWith('relay.db'))).toBe(true)
  await t.relay.stop()
  expect(openFilesIn(t.dataDir)).toEqual([])
  await t.close()
})
