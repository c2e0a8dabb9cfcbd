/**
 * The web console in a real browser: Debian's Chromium, driven through playwright-core, against the
 * real compiled binary. A key left in localStorage by an older console moves to IndexedDB as a
 * non-extractable key; a key made in the browser is offered for export once, sends a message with an
 * attachment to an agent the test drives, sees the answer arrive live (by the agent's name) and acks
 * it; an admin key sees the traffic chart and suspends that agent after confirming. Every request the
 * browser makes stays on the relay's loopback origin. Screenshots of every view, light and dark, go to
 * test-artifacts/console/ (UPDATE_SCREENSHOTS=1 also refreshes the ones docs/console.md shows, in
 * docs/img/). Skipped with one line where Chromium is missing (never under CI).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decodeKeyFile, encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { CONSOLE_CSP } from '../../src/http/routes/console.ts'
import { BINARY, ROOT, buildBinary, startBinary, type RunningBinary, stopBinary } from '../support/binary.ts'
import { requireProgram } from '../support/requires.ts'
import { until } from '../support/ws.ts'

const CHROMIUM = '/usr/bin/chromium'
const hasChromium = requireProgram('chromium', existsSync(CHROMIUM) ? CHROMIUM : null, 'the console browser test')
const ARTIFACTS = join(ROOT, 'test-artifacts', 'console')
/**
 * The screenshots kept in the repository (docs/console.md shows them), by artifact name; `UPDATE_SCREENSHOTS=1`
 * refreshes them (docs/img/console-operator.png comes from operator-chart.test.ts: an hour of traffic).
 */
const DOC_SHOTS: Record<string, string> = { key: 'console-key.png', inbox: 'console-inbox.png', 'key-export': 'console-key-export.png', 'inbox-dark': 'console-inbox-dark.png' }

/** WCAG contrast ratio of the text of every visible button against what is behind it, lowest first. */
async function buttonContrasts(page: import('playwright-core').Page): Promise<{ ratio: number; text: string }[]> {
  return page.evaluate(() => {
    const { document, getComputedStyle } = globalThis as any // runs in the page (the project's types have no DOM)
    const rgb = (c: string) => (c.match(/[\d.]+/g) ?? []).map(Number)
    const lum = ([r, g, b]: number[]) => {
      const f = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b)
    }
    const background = (el: any): number[] => {
      for (; el; el = el.parentElement) {
        const c = rgb(getComputedStyle(el).backgroundColor)
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3)
      }
      return [255, 255, 255]
    }
    return ([...document.querySelectorAll('button')] as any[])
      .filter((b) => b.offsetParent !== null && !b.disabled)
      .map((b) => {
        const [l1, l2] = [lum(rgb(getComputedStyle(b).color)), lum(background(b))].sort((x, y) => y - x)
        return { ratio: Math.round(((l1 + 0.05) / (l2 + 0.05)) * 10) / 10, text: (b.textContent ?? '').trim().slice(0, 30) }
      })
      .sort((x, y) => x.ratio - y.ratio)
  })
}

const adminKeys = generateKeyPair()
let dir: string
let relay: RunningBinary

beforeAll(async () => {
  if (!hasChromium) return
  await buildBinary()
  dir = mkdtempSync(join(tmpdir(), 'relay-console-'))
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data'), env: { RELAY_ADMIN_KEYS: adminKeys.publicKey } })
}, 120_000)

afterAll(async () => {
  if (!hasChromium) return
  await stopBinary(relay, dir)
})

describe('/console', () => {
  test('the browser code type-checks against the DOM (its own tsconfig; the project check leaves it out)', () => {
    const r = Bun.spawnSync([join(ROOT, 'node_modules/.bin/tsc'), '--noEmit', '-p', join(ROOT, 'src/console/app')], { stdout: 'pipe', stderr: 'pipe' })
    expect([r.exitCode, r.stdout.toString()]).toEqual([0, ''])
  }, 60_000) // a full type-check: slow on a loaded machine, and a timeout here would take the relay down with it

  test('the page and its script come from the binary itself', async () => {
    if (!hasChromium) return
    expect(existsSync(BINARY)).toBe(true)
    for (const path of ['/console', '/console/']) {
      const res = await fetch(relay.url + path)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP)
      expect(res.headers.get('x-frame-options')).toBe('DENY')
      const html = await res.text()
      expect(html).toContain('<script type="module" src="/console/console.js">')
      expect(html.match(/https?:\/\/[^"'\s]+/g) ?? []).toEqual([])
    }
    for (const directive of ["script-src 'self';", "connect-src 'self';", "frame-ancestors 'none'", "require-trusted-types-for 'script'"]) expect(CONSOLE_CSP).toContain(directive)
    expect(CONSOLE_CSP).not.toContain('unsafe')
    const js = await fetch(`${relay.url}/console/console.js`)
    expect(js.headers.get('content-type')).toContain('javascript')
    const code = await js.text()
    // signs in the browser with WebCrypto Ed25519, names no outside host (the SVG namespace is a name, never fetched)
    expect(code).toContain('Ed25519')
    expect((code.match(/https?:\/\/[a-z0-9.-]+/gi) ?? []).filter((u) => u !== 'http://www.w3.org')).toEqual([])
    expect(code.match(/http:\/\/www\.w3\.org[^"'`]*/g) ?? []).toEqual(['http://www.w3.org/2000/svg'])
  })

  test.skipIf(!hasChromium)(
    'a key moves out of localStorage; a browser key is exported once, messages an agent, sees the answer live, uploads a file; an admin key sees the traffic and suspends the agent',
    async () => {
      const { chromium } = await import('playwright-core')
      mkdirSync(ARTIFACTS, { recursive: true })
      const profile = mkdtempSync(join(tmpdir(), 'relay-console-chromium-'))
      const context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        viewport: { width: 1100, height: 800 },
        acceptDownloads: true,
      })
      const requested: string[] = []
      context.on('request', (r) => requested.push(r.url()))
      const sockets: string[] = []
      const errors: string[] = []
      try {
        const page = context.pages()[0] ?? (await context.newPage())
        page.on('websocket', (ws) => sockets.push(ws.url()))
        page.on('pageerror', (e) => errors.push(String(e)))
        const dialogs: string[] = []
        page.on('dialog', (d) => (dialogs.push(d.message()), void d.accept()))
        const shot = (name: string, fullPage = true) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage })
        /** What IndexedDB holds for the console, read in the page: the stored record's shape and whether its key can be exported. */
        const storedKey = () =>
          page.evaluate(async () => {
            const { indexedDB, localStorage } = globalThis as any
            const record: any = await new Promise((resolve, reject) => {
              const open = indexedDB.open('agent-relay-console')
              open.onerror = () => reject(open.error)
              open.onsuccess = () => {
                const get = open.result.transaction('keys').objectStore('keys').get('current')
                get.onsuccess = () => resolve(get.result ?? null)
              }
            })
            if (!record) return null
            const exported = await crypto.subtle.exportKey('pkcs8', record.signing_key).then(
              () => 'exported',
              (err) => (err as Error).name,
            )
            return { publicKey: record.public_key, extractable: record.signing_key.extractable, exported, legacy: localStorage.getItem('agent-relay-console.key') }
          })
        const keyEl = page.locator('#public-key')
        /** Every button of the view readable (WCAG AA, 4.5:1 for text) in light and dark; a dark screenshot of it. */
        const readable = async (view: string, heading = view) => {
          for (const scheme of ['dark', 'light'] as const) {
            await page.emulateMedia({ colorScheme: scheme })
            if (view !== 'Key') await page.getByRole('link', { name: view, exact: true }).click()
            await page.getByRole('heading', { name: heading, exact: true }).waitFor()
            await page.waitForTimeout(300)
            const lowest = (await buttonContrasts(page))[0]
            expect({ scheme, view, ...lowest, ok: lowest.ratio >= 4.5 }).toMatchObject({ ok: true })
            if (scheme === 'dark') await shot(`${view.toLowerCase().replace(/\W+/g, '-')}-dark`, false)
          }
        }

        // 0. a key file an older console left in localStorage moves to IndexedDB, once, and is deleted
        await page.goto(`${relay.url}/console`)
        await page.getByRole('button', { name: 'Generate a new key' }).waitFor()
        await shot('key')
        // HTML can never be parsed into the page from a string (Trusted Types with no policy)
        expect(
          await page.evaluate(() => {
            try {
              ;(globalThis as any).document.createElement('div').innerHTML = '<img src=x>'
              return 'parsed'
            } catch (err) {
              return (err as Error).name
            }
          }),
        ).toBe('TypeError')
        const legacyKeys = generateKeyPair()
        await page.evaluate((file) => localStorage.setItem('agent-relay-console.key', file), encodeKeyFile(legacyKeys))
        await page.reload()
        await page.getByRole('heading', { name: 'Your key has moved' }).waitFor()
        expect(await storedKey()).toEqual({ publicKey: legacyKeys.publicKey, extractable: false, exported: 'InvalidAccessError', legacy: null })
        await shot('key-moved', false)
        await page.getByRole('button', { name: 'Continue without a copy' }).click()
        expect(dialogs.pop()).toContain('cannot be exported later')
        await keyEl.waitFor()
        expect(await keyEl.getAttribute('title')).toBe(legacyKeys.publicKey)
        // the key bar offers no export: the browser cannot give the key back
        expect(await page.locator('.key-bar').getByRole('button').allTextContents()).toEqual(['Copy', 'Forget'])
        await page.getByRole('button', { name: 'Forget' }).click()
        await page.getByRole('button', { name: 'Generate a new key' }).waitFor()
        await readable('Key', 'Your key')
        expect(await storedKey()).toBeNull()

        // 1. a key made in the browser, exported once when it is made, kept across a reload
        await page.getByRole('button', { name: 'Generate a new key' }).click()
        await page.getByRole('heading', { name: 'Save a copy of your new key' }).waitFor()
        await shot('key-export', false)
        const exporting = page.waitForEvent('download')
        await page.getByRole('button', { name: 'Export key file' }).click()
        const keyFile = await exporting
        const exported = decodeKeyFile(await Bun.file((await keyFile.path()) as string).text())
        await keyEl.waitFor()
        const browserKey = (await keyEl.getAttribute('title')) as string
        expect(browserKey).toMatch(/^[A-Za-z0-9_-]{43}$/)
        expect(exported.publicKey).toBe(browserKey)
        expect(await storedKey()).toEqual({ publicKey: browserKey, extractable: false, exported: 'InvalidAccessError', legacy: null })
        await page.reload()
        await keyEl.waitFor()
        expect(await keyEl.getAttribute('title')).toBe(browserKey)
        expect(await page.getByRole('button', { name: 'Export key file' }).count()).toBe(0)
        await page.getByText('live', { exact: true }).waitFor()
        // the operator view is not offered to an ordinary key
        expect(await page.getByRole('link', { name: 'Operator' }).count()).toBe(0)

        // 2. an agent driven by the test
        const agentKeys = generateKeyPair()
        const agent = new RelayClient({ baseUrl: relay.url, keys: agentKeys })
        await agent.updateProfile({ display_name: 'echo agent', visibility: 'public', inbox_policy: 'open', capabilities: [{ name: 'echo', description: 'says it back', tags: ['demo'] }] })

        // 3. send a text message with an attachment, with upload progress
        await page.getByRole('link', { name: 'Send' }).click()
        // the key field validates: its pattern compiles in the browser's `v` mode, and a non-key is refused before sending
        const recipient = page.getByLabel('Recipient public key')
        expect(await recipient.evaluate((el: any) => new RegExp(`^(?:${el.pattern})$`, 'v').test('A'.repeat(43)))).toBe(true)
        await recipient.fill('not a key')
        expect(await recipient.evaluate((el: any) => [el.validity.patternMismatch, el.form?.checkValidity()])).toEqual([true, false])
        await recipient.fill(agentKeys.publicKey)
        expect(await recipient.evaluate((el: any) => el.validity.valid)).toBe(true)
        await page.getByLabel('Body', { exact: true }).fill('hello agent')
        const fileBytes = Buffer.alloc(300_000, 7)
        await page.getByLabel('Attachments').setInputFiles({ name: 'notes.bin', mimeType: 'application/octet-stream', buffer: fileBytes })
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        const sentId = (await page.locator('.sent-id').textContent({ timeout: 15_000 })) as string
        expect(sentId).toMatch(/^msg_/)
        expect(await page.locator('.upload progress').evaluate((p: any) => p.value === p.max)).toBe(true)
        await expect(page.locator('.upload').textContent()).resolves.toContain('done: blob_')
        await shot('send')

        // 4. the agent receives it with the file, and answers
        const inbox = await until(async () => {
          const page = await agent.poll()
          return page.messages.length ? page.messages : null
        }, 10_000, 'the console message')
        const received = inbox[0]
        expect(received).toMatchObject({ message_id: sentId, sender_key: browserKey, content_type: 'text/plain', body: 'hello agent' })
        expect(received.attachments?.[0]).toMatchObject({ filename: 'notes.bin', size: fileBytes.length })
        const res = await agent.transport.send('GET', `/v1/blobs/${received.attachments![0].blob_id}`)
        expect(Buffer.from(await res.arrayBuffer()).equals(fileBytes)).toBe(true)
        const answerFile = await agent.uploadBlob(new TextEncoder().encode('the answer, as a file\n'), { contentType: 'text/plain' })
        const reply = await agent.send({
          recipient_key: browserKey,
          body: { text: 'hello human', echo: 'hello agent' },
          in_reply_to: sentId,
          thread_id: 'thread-1',
          attachments: [{ blob_id: answerFile.blob_id, filename: 'answer.txt' }],
        })

        // 5. the answer arrives live in the inbox, and is acked
        await page.getByRole('link', { name: 'Inbox' }).click()
        const card = page.locator(`article[data-message-id="${reply.message_id}"]`)
        await card.waitFor({ timeout: 10_000 })
        expect(await card.textContent()).toContain('hello human')
        // the sender by its display name, its key on hover
        const sender = card.locator('.who .agent')
        await expect(sender.textContent()).resolves.toBe('from echo agent')
        expect(await sender.getAttribute('title')).toBe(agentKeys.publicKey)
        // a body with text and more: the text shown, the JSON folded away
        expect(await card.locator('.body > .text').textContent()).toBe('hello human')
        expect(await card.locator('details.json').evaluate((d: any) => d.open)).toBe(false)
        expect(await card.locator('details.json summary').textContent()).toBe('JSON, 2 fields: text, echo')
        // what `relay send --text` sends, {"text": …}: shown as text alone
        const textOnly = await agent.send({ recipient_key: browserKey, body: { text: 'sent with --text,\nover two lines' } })
        const textCard = page.locator(`article[data-message-id="${textOnly.message_id}"]`)
        await textCard.waitFor({ timeout: 10_000 })
        expect(await textCard.locator('.body').evaluate((b) => [b.classList.contains('text'), b.textContent])).toEqual([true, 'sent with --text,\nover two lines'])
        expect(await textCard.locator('details').count()).toBe(0)
        await textCard.getByRole('button', { name: 'Ack' }).click()
        await shot('inbox')
        await readable('Inbox')
        // its attachment downloads through a signed request made in the browser
        const downloading = page.waitForEvent('download')
        await card.getByRole('button', { name: 'Download answer.txt' }).click()
        const saved = await downloading
        expect(saved.suggestedFilename()).toBe('answer.txt')
        expect(await Bun.file((await saved.path()) as string).text()).toBe('the answer, as a file\n')
        await card.getByRole('button', { name: 'Ack' }).click()
        await until(async () => (await agent.messageStatus(reply.message_id)).status === 'delivered', 5000, 'the ack')

        // 6. the other views
        await card.getByRole('button', { name: 'thread thread-1' }).click()
        await page.getByLabel('Thread id').waitFor()
        expect(await page.getByLabel('Thread id').inputValue()).toBe('thread-1')
        await page.locator(`.messages article[data-message-id="${reply.message_id}"]`).waitFor()
        await shot('threads')
        await page.getByRole('link', { name: 'Status' }).click()
        await page.getByLabel('Message id').fill(sentId)
        await page.getByRole('button', { name: 'Check' }).click()
        await expect(page.locator('.status-value').textContent({ timeout: 5000 })).resolves.toBe('delivered')
        await shot('status')
        await page.getByRole('link', { name: 'Discover' }).click()
        await page.getByRole('button', { name: 'demo (1)' }).click()
        await page.getByText('echo agent').waitFor()
        await shot('discover')
        await page.getByRole('link', { name: 'Profile' }).click()
        await page.getByLabel('Display name').fill('console user')
        await page.getByRole('button', { name: 'Save profile' }).click()
        await page.getByText('Profile saved').waitFor()
        await page.getByLabel('Peer public key').fill(agentKeys.publicKey)
        await page.getByRole('button', { name: 'Add or change entry' }).click()
        await page.getByRole('button', { name: `Remove ${agentKeys.publicKey}` }).waitFor()
        await shot('profile')
        expect((await agent.getAgent(browserKey)).display_name).toBe('console user')
        await page.getByRole('link', { name: 'Downloads' }).click()
        await page.getByRole('heading', { name: 'Downloads' }).waitFor()
        await shot('downloads')
        await page.getByRole('link', { name: 'What the relay sees' }).click()
        await page.getByRole('heading', { name: 'What this relay can see' }).waitFor()
        await shot('visibility')
        // every view's buttons readable in both colour schemes, each view also shot dark
        for (const [view, heading] of [['Send', 'Send a message'], ['Threads'], ['Status', 'Message status'], ['Downloads'], ['Discover', 'Discover agents'], ['Profile'], ['What the relay sees', 'What this relay can see']]) {
          await readable(view, heading)
        }

        // 7. an operator key, imported from its key file, suspends the agent
        await page.getByRole('button', { name: 'Forget' }).click()
        await page.getByRole('button', { name: 'Generate a new key' }).waitFor()
        // its key file as an MRP tool writes it: the raw 32-byte seed (pasted JSON is imported in encryption.test.ts)
        await page.getByLabel('Key file').setInputFiles({ name: 'operator.key', mimeType: 'application/octet-stream', buffer: Buffer.from(adminKeys.seed) })
        await page.getByRole('link', { name: 'Operator' }).click()
        const suspend = page.getByRole('button', { name: `Suspend ${agentKeys.publicKey}` })
        await suspend.waitFor()
        // the traffic of the last hour, as a chart (the figures of GET /v1/admin/traffic)
        const summary = (await page.locator('#traffic-summary').textContent({ timeout: 5000 })) as string
        const total = Number(/Last hour: (\d+) requests/.exec(summary)?.[1])
        expect(total).toBeGreaterThan(10)
        expect(await page.locator('svg.chart rect.bar').count()).toBeGreaterThan(0)
        expect(await page.locator('svg.chart rect.bar.client').count()).toBeGreaterThan(0) // the 403 of the ordinary key's operator check
        await page.getByLabel('Reason for suspensions').fill('test run')
        // suspending asks first; declining changes nothing
        page.removeAllListeners('dialog')
        page.once('dialog', (d) => (dialogs.push(d.message()), void d.dismiss()))
        await suspend.click()
        expect(dialogs.pop()).toStartWith('Suspend echo agent (')
        await page.waitForTimeout(300)
        expect((await agent.getAgent()).status).toBe('active')
        page.on('dialog', (d) => (dialogs.push(d.message()), void d.accept()))
        await suspend.click()
        await page.getByRole('button', { name: `Unsuspend ${agentKeys.publicKey}` }).waitFor()
        await shot('operator-full')
        await page.evaluate(() => (globalThis as any).scrollTo(0, 0))
        await shot('operator', false)
        const refused = await agent.getAgent().then(
          () => 'ok',
          (e) => e.code,
        )
        expect(refused).toBe('agent_suspended')
        // Refresh reads the figures again (the view's own address: no navigation happens by itself)
        const [again] = await Promise.all([
          page.waitForRequest((r) => r.url().includes('/v1/admin/stats'), { timeout: 5000 }),
          page.getByRole('button', { name: 'Refresh' }).click(),
        ])
        expect(again.method()).toBe('GET')

        // a phone-sized screen
        await page.setViewportSize({ width: 390, height: 800 })
        await page.getByRole('link', { name: 'Inbox' }).click()
        await page.getByRole('heading', { name: 'Inbox' }).waitFor()
        await shot('inbox-phone')
        await page.setViewportSize({ width: 1100, height: 800 })

        // readable buttons in both colour schemes, on the operator view too
        await readable('Operator')
        if (process.env.UPDATE_SCREENSHOTS === '1') for (const [name, file] of Object.entries(DOC_SHOTS)) copyFileSync(join(ARTIFACTS, `${name}.png`), join(ROOT, 'docs', 'img', file))

        expect(errors).toEqual([])
        expect(requested.filter((u) => !u.startsWith(relay.url + '/') && !u.startsWith('data:') && !u.startsWith('blob:'))).toEqual([])
        expect(sockets.length).toBeGreaterThan(0)
        expect(sockets.filter((u) => !u.startsWith(relay.url.replace('http:', 'ws:') + '/'))).toEqual([])
      } finally {
        await context.close()
        rmSync(profile, { recursive: true, force: true })
      }
    },
    180_000,
  )
})
