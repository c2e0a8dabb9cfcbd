/**
 * /docs in a real browser (Debian's Chromium through playwright-core): the page renders the reference
 * and every request it makes on load goes to the relay itself — no CDN, fonts, proxy or telemetry host.
 * /docs/ (trailing slash) works the same. Skipped with one line where Chromium is missing (never under CI).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { EXAMPLE } from '../../src/http/openapi-document.ts'
import { SCALAR_CONFIG } from '../../src/http/routes/docs.ts'
import { ROOT } from '../support/binary.ts'
import { startTestRelay, type TestRelay } from '../support/harness.ts'
import { requireProgram } from '../support/requires.ts'

const CHROMIUM = '/usr/bin/chromium'
const hasChromium = requireProgram('chromium', existsSync(CHROMIUM) ? CHROMIUM : null, 'the /docs browser test')

let t: TestRelay
let origin: string
beforeAll(async () => {
  t = await startTestRelay({ host: '127.0.0.1' })
  const { port } = await t.relay.start()
  origin = `http://127.0.0.1:${port}`
})
afterAll(() => t.close())

describe('/docs', () => {
  test('/docs and /docs/ serve the same page, configured to call no outside service', async () => {
    const [a, b] = await Promise.all([fetch(`${origin}/docs`), fetch(`${origin}/docs/`)])
    expect([a.status, b.status]).toEqual([200, 200])
    const html = await a.text()
    expect(await b.text()).toBe(html)
    expect(html).toContain('"proxyUrl":""')
    expect(html).toContain('"telemetry":false')
    expect(html).toContain('"url":"/v1/openapi.json"') // absolute: the same document from /docs and /docs/
    expect(html.match(/https?:\/\/[^"'\s]+/g) ?? []).toEqual([])
    expect(SCALAR_CONFIG.agent.disabled).toBe(true)
    const script = await fetch(`${origin}/docs/scalar.js`)
    expect(script.status).toBe(200)
    expect(script.headers.get('content-type')).toContain('javascript')
    await script.arrayBuffer()
  })

  test.skipIf(!hasChromium)('renders in Chromium, and every request on load goes to the relay itself', async () => {
    const { chromium } = await import('playwright-core')
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      for (const path of ['/docs', '/docs/']) {
        const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
        const requested: string[] = []
        page.on('request', (r) => requested.push(r.url()))
        await page.goto(origin + path, { waitUntil: 'networkidle' })
        await page.getByText('Signing a request').first().waitFor({ timeout: 30_000 })
        await page.getByText('Read an agent profile').first().waitFor({ timeout: 30_000 })
        await page.waitForTimeout(1000) // anything the rendered page fetches afterwards is recorded too
        expect(requested.filter((u) => !u.startsWith(origin + '/'))).toEqual([])
        expect(requested).toContain(`${origin}/v1/openapi.json`)
        const text = await page.innerText('body')
        expect(text).not.toContain('YOUR_SECRET_TOKEN')
        // request examples carry the worked example's headers, which a reader can check by hand
        expect(text).toContain(`X-M2M-Public-Key: ${EXAMPLE.publicKey}`)
        expect(text).toContain(`X-M2M-Signature: ${EXAMPLE.signature}`)
        expect(text).not.toContain('\\n')
        if (path === '/docs/') {
          mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true })
          await page.screenshot({ path: join(ROOT, 'test-artifacts', 'docs.png') })
        }
        await page.close()
      }
    } finally {
      await browser.close()
    }
  }, 120_000)
})
