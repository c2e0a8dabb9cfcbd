/**
 * The operator view's traffic chart in a real browser (Debian's Chromium through playwright-core),
 * drawn from an hour of real traffic: a relay in process on a real port, its clock moved minute by
 * minute while agents make requests (some refused with 4xx), then held at the last of them for the browser. The
 * chart has one slot per minute, bar heights in proportion to the counts it was given, errors stacked
 * on top, and the same figures in its table. Its screenshot is the one docs/console.md shows
 * (`UPDATE_SCREENSHOTS=1`). Skipped with one line where Chromium is missing (never under CI).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { copyFileSync, existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { FakeClock } from '../../src/lib/clock.ts'
import { ROOT } from '../support/binary.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'

const CHROMIUM = '/usr/bin/chromium'
const hasChromium = requireProgram('chromium', existsSync(CHROMIUM) ? CHROMIUM : null, 'the operator chart browser test')
const ARTIFACTS = join(ROOT, 'test-artifacts', 'console')
const MINUTE = 60_000

const adminKeys = generateKeyPair()
let t: TestRelay
let origin: string

beforeAll(async () => {
  if (!hasChromium) return
  const now = Date.now()
  const clock = new FakeClock(now - 59 * MINUTE)
  t = await startTestRelay({ host: '127.0.0.1', admin: { keys: [adminKeys.publicKey] } }, { clock })
  const { port } = await t.relay.start()
  origin = `http://127.0.0.1:${port}`
  // an hour of traffic: a daily-looking swell, a burst of refused requests in the middle
  const agents = Array.from({ length: 4 }, () => t.client())
  const stranger = generateKeyPair().publicKey
  for (let m = 0; m < 59; m++) {
    const ok = Math.round(12 + 10 * Math.sin(m / 6) + (m % 7))
    const refused = m >= 38 && m < 44 ? 6 + (m % 3) : m % 11 === 0 ? 1 : 0
    await Promise.all([
      ...Array.from({ length: ok }, (_, i) => agents[i % agents.length].getAgent()),
      ...Array.from({ length: refused }, (_, i) => agents[i % agents.length].transport.send('GET', `/v1/agents/${stranger}`).then((r) => r.arrayBuffer())),
    ])
    await Bun.sleep(5) // counted once answered
    clock.advance(MINUTE)
  }
  // held at the minute the traffic ends in: with the wall clock, a setup that crossed into the next minute
  // would push the first minute out of the hour shown (within the ±300 s the browser's signatures allow)
  clock.set(now)
}, 120_000)

afterAll(async () => {
  if (hasChromium) await t?.close()
})

describe('the traffic chart', () => {
  test.skipIf(!hasChromium)('one slot per minute, bars in proportion, errors on top, the figures in a table', async () => {
    const { chromium } = await import('playwright-core')
    mkdirSync(ARTIFACTS, { recursive: true })
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      const page = await browser.newPage({ viewport: { width: 1100, height: 800 } })
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(String(e)))
      await page.goto(`${origin}/console`)
      await page.getByLabel('…or paste its content').fill(encodeKeyFile(adminKeys))
      await page.getByRole('button', { name: 'Import' }).click()
      const answer = page.waitForResponse((r) => r.url().endsWith('/v1/admin/traffic'))
      await page.getByRole('link', { name: 'Operator' }).click()
      const { minutes } = (await (await answer).json()) as { minutes: { minute: string; requests: number; client_errors: number; server_errors: number }[] }
      await page.locator('svg.chart').waitFor()
      expect(minutes).toHaveLength(60)
      expect(minutes.filter((m) => m.requests > 0).length).toBeGreaterThanOrEqual(59)
      expect(minutes.reduce((a, m) => a + m.client_errors, 0)).toBeGreaterThanOrEqual(36)

      // what is drawn: per slot, the height of each stacked part
      const drawn = await page.locator('svg.chart g.minute').evaluateAll((gs: any[]) =>
        gs.map((g) => Object.fromEntries([...g.querySelectorAll('rect')].map((r: any) => [r.getAttribute('class').replace('bar ', ''), Number(r.getAttribute('height'))]))),
      )
      expect(drawn).toHaveLength(60)
      const busiest = minutes.reduce((a, m) => Math.max(a, m.requests), 0)
      const top = busiest <= 4 ? 4 : [1, 2, 5, 10].map((k) => k * 10 ** Math.floor(Math.log10(busiest))).find((v) => v >= busiest)!
      const plot = await page.locator('svg.chart line.axis').evaluate((l: any) => Number(l.getAttribute('y1')) - 8)
      minutes.forEach((m, i) => {
        const d = drawn[i]
        const expected = { ok: m.requests - m.client_errors - m.server_errors, client: m.client_errors, server: m.server_errors }
        for (const [part, n] of Object.entries(expected)) {
          if (n === 0) expect(d[part]).toBeUndefined()
          else expect(d[part]).toBeCloseTo(Math.max((n / top) * plot, 1), 3)
        }
      })
      // the summary and the table carry the same figures
      const total = minutes.reduce((a, m) => a + m.requests, 0)
      expect(await page.locator('#traffic-summary').textContent()).toStartWith(`Last hour: ${total} requests, ${minutes.reduce((a, m) => a + m.client_errors, 0)} client errors (4xx)`)
      await page.getByText('Figures per minute').click()
      expect(await page.locator('.traffic table tbody tr').count()).toBe(minutes.filter((m) => m.requests > 0).length)
      expect(errors).toEqual([])

      await page.locator('.traffic').scrollIntoViewIfNeeded()
      await page.getByText('Figures per minute').click() // folded again for the picture
      await page.evaluate(() => (globalThis as any).scrollTo(0, 0))
      await page.screenshot({ path: join(ARTIFACTS, 'operator-hour.png') })
      if (process.env.UPDATE_SCREENSHOTS === '1') copyFileSync(join(ARTIFACTS, 'operator-hour.png'), join(ROOT, 'docs', 'img', 'console-operator.png'))
    } finally {
      await browser.close()
    }
  }, 120_000)
})
