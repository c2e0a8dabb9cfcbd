/**
 * End-to-end encryption in the console, in Debian's Chromium against the compiled binary, with the
 * TypeScript client (native primitives) on the other end: the console's key declares support in its
 * profile; it sends v3 to an agent that declares v3 and v2 to one that declares only v2, each with an
 * encrypted attachment the client decrypts; it opens what the client sends (both versions, with an
 * encrypted attachment downloaded decrypted), shows a tampered message and an unknown version with
 * their reason and without a body, sends plaintext when asked; a key stored without its X25519 half
 * says why it cannot decrypt until its file is imported again. The same both ways with the CLI
 * (`relay send` / `poll` / `download --message`). Afterwards no marker of an encrypted plaintext is
 * anywhere in the relay's data directory (database, WAL, blob files). Screenshots go to
 * test-artifacts/console-e2e/ (UPDATE_SCREENSHOTS=1 also refreshes docs/img/console-encrypted*.png).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeKeyFile, generateKeyPair } from '../../src/auth/sign.ts'
import { RelayClient } from '../../src/client/index.ts'
import { ENCRYPTED_CONTENT_TYPE } from '../../src/crypto/index.ts'
import { encryptedBlobSize } from '../../src/crypto/blob-layout.ts'
import { BINARY, ROOT, buildBinary, startBinary, type RunningBinary, stopBinary } from '../support/binary.ts'
import { runCli } from '../support/cli.ts'
import { chromiumPath, openConsole } from '../support/console-browser.ts'
import { requireProgram } from '../support/requires.ts'
import { filesUnder } from '../support/disk.ts'
import { IndependentAgent } from '../support/independent-agent.ts'
import { readEncryptedBlob, writeEncryptedBlob } from '../support/independent-blob.ts'
import { openV2Body, sealV2Body, unwrapDekV2, wrapDekV2 } from '../support/independent-hpke.ts'
import { until } from '../support/ws.ts'

const hasChromium = requireProgram('chromium', chromiumPath(), 'the console encryption browser test')
const ARTIFACTS = join(ROOT, 'test-artifacts', 'console-e2e')
const DOC_SHOTS: Record<string, string> = { 'inbox-encrypted': 'console-encrypted-inbox.png', 'relay-sees': 'console-relay-sees.png' }

/** Strings that exist only inside encrypted plaintexts: none may reach the relay's disk. */
const MARK = {
  consoleBody: 'console-body-7f3a91c2',
  consoleFile: 'console-file-5be0d4a8',
  consoleFileName: 'plan-name-3c9d01ee',
  consoleV2Body: 'console-v2-body-c81e22f0',
  clientBody: 'client-body-0d9c6b17',
  clientFile: 'client-file-a4f27e35',
  clientV2Body: 'client-v2-body-9e1b5c60',
  consoleToCli: 'console-to-cli-31d7e8a2',
  consoleToCliFile: 'console-to-cli-file-6f02b9d4',
  consoleToCliFileName: 'for-dave-name-e41a7c09',
  cliToConsole: 'cli-to-console-b7c4015e',
  cliToConsoleFile: 'cli-to-console-file-28ae93f1',
}

let dir: string
let relay: RunningBinary

beforeAll(async () => {
  if (!hasChromium) return
  await buildBinary()
  dir = mkdtempSync(join(tmpdir(), 'relay-console-e2e-'))
  relay = await startBinary({ cwd: dir, dataDir: join(dir, 'data') })
}, 120_000)

afterAll(async () => {
  if (!hasChromium) return
  await stopBinary(relay, dir)
})

describe('/console end-to-end encryption', () => {
  test.skipIf(!hasChromium)(
    'console ⇄ client encrypted both ways (v3 and v2, attachments included), failures with their reason, plaintext on request, a key stored without its X25519 half',
    async () => {
      expect(existsSync(BINARY)).toBe(true)
      mkdirSync(ARTIFACTS, { recursive: true })
      // the console's key, imported from its file; two agents the test drives with the client
      const consoleKeys = generateKeyPair()
      const { page, errors, close } = await openConsole(relay.url, consoleKeys)
      try {
        page.on('dialog', (d) => void d.accept())
        const shot = (name: string, fullPage = true) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage })
        const card = (id: string) => page.locator(`article[data-message-id="${id}"]`)
        const downloaded = async (button: import('playwright-core').Locator) => {
          const waiting = page.waitForEvent('download')
          await button.click()
          const d = await waiting
          return { name: d.suggestedFilename(), text: await Bun.file((await d.path()) as string).text() }
        }

        const bob = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
        const carol = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
        await bob.updateProfile({ display_name: 'bob' })
        await bob.declareEncryption()
        await carol.updateProfile({ display_name: 'carol (v2 only)', metadata: { encryption: { versions: [2] } } })

        // the stored record: both halves non-extractable
        const stored = await page.evaluate(async () => {
          const { indexedDB } = globalThis as any
          const record: any = await new Promise((resolve) => {
            const open = indexedDB.open('agent-relay-console')
            open.onsuccess = () => {
              const get = open.result.transaction('keys').objectStore('keys').get('current')
              get.onsuccess = () => resolve(get.result)
            }
          })
          return { signing: record.signing_key.extractable, agreement: [record.agreement_key.algorithm.name, record.agreement_key.extractable, record.agreement_key.usages] }
        })
        expect(stored).toEqual({ signing: false, agreement: ['X25519', false, ['deriveBits']] })
        // the first start declares support in the profile
        await until(async () => ((await bob.getAgent(consoleKeys.publicKey)).metadata as any)?.encryption ?? null, 5000, 'the declaration')
        expect((await bob.getAgent(consoleKeys.publicKey)).metadata).toMatchObject({ encryption: { versions: [3, 2], require: false } })

        // 1. console → bob (declares v3): body and attachment encrypted in the browser
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(bob.publicKey)
        await page.getByLabel('Recipient public key').dispatchEvent('change')
        await page.locator('#encryption-note', { hasText: 'End-to-end encrypted (v3)' }).waitFor({ timeout: 5000 })
        await page.getByLabel('Body', { exact: true }).fill(`hello bob ${MARK.consoleBody}`)
        await page.getByLabel('Attachments').setInputFiles({ name: `${MARK.consoleFileName}.txt`, mimeType: 'text/plain', buffer: Buffer.from(`the plan ${MARK.consoleFile}\n`.repeat(5000)) })
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        const toBob = (await page.locator('.sent-id').textContent({ timeout: 15_000 })) as string
        expect(await page.locator('.sent-how').textContent()).toBe('(end-to-end encrypted, v3)')
        await shot('send-encrypted')
        const atBob = await until(async () => (await Bun.sleep(50), await bob.poll()).messages.find((m) => m.message_id === toBob) ?? null, 10_000, 'the message at bob')
        expect(atBob).toMatchObject({ content_type: 'text/plain', body: `hello bob ${MARK.consoleBody}`, encryption: { version: 3, sender_verified: true } })
        // the relay's record of an encrypted attachment has no file name: it would be in the clear
        expect(atBob.attachments?.[0]).toMatchObject({ encrypted: true })
        expect(Object.keys(atBob.attachments![0]!)).not.toContain('filename')
        const bobFile = await new Response(await bob.downloadDecrypted(atBob, atBob.attachments![0])).text()
        expect(bobFile).toBe(`the plan ${MARK.consoleFile}\n`.repeat(5000))

        // 2. console → carol (declares only v2); the Send view shown afresh (from another view)
        await page.getByRole('link', { name: 'Status' }).click()
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(carol.publicKey)
        await page.getByLabel('Body', { exact: true }).fill(`hello carol ${MARK.consoleV2Body}`)
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        await expect(page.locator('.sent-how').textContent({ timeout: 15_000 })).resolves.toBe('(end-to-end encrypted, v2)')
        const atCarol = await until(async () => (await Bun.sleep(50), await carol.poll()).messages.find((m) => m.sender_key === consoleKeys.publicKey) ?? null, 10_000, 'the message at carol')
        expect(atCarol).toMatchObject({ body: `hello carol ${MARK.consoleV2Body}`, encryption: { version: 2, sender_verified: true } })

        // 3. plaintext when asked, to the same agent that declares v3
        await page.getByRole('link', { name: 'Status' }).click()
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(bob.publicKey)
        await page.getByLabel('Send in plaintext').check()
        await page.getByLabel('Body', { exact: true }).fill('a plaintext note')
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        await expect(page.locator('.sent-how').textContent({ timeout: 15_000 })).resolves.toBe('(plaintext)')
        const plainAtBob = await until(async () => (await Bun.sleep(50), await bob.poll()).messages[0] ?? null, 10_000, 'the plaintext')
        expect(plainAtBob).toMatchObject({ content_type: 'text/plain', body: 'a plaintext note' })
        expect((plainAtBob as any).encryption).toBeUndefined()

        // 3b. encrypted when asked, to an agent that declares nothing: v2, which any agent reads
        const erin = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
        await erin.updateProfile({ display_name: 'erin (declares nothing)' })
        await page.getByRole('link', { name: 'Status' }).click()
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(erin.publicKey)
        await page.getByLabel('Recipient public key').dispatchEvent('change')
        await page.locator('#encryption-note', { hasText: 'Plaintext: the recipient declares no encryption support' }).waitFor({ timeout: 5000 })
        await page.getByLabel('Encrypt even if the recipient declares no support').check()
        await page.locator('#encryption-note', { hasText: 'End-to-end encrypted (v2): asked for' }).waitFor({ timeout: 5000 })
        await page.getByLabel('Body', { exact: true }).fill('sealed although erin declares nothing')
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        await expect(page.locator('.sent-how').textContent({ timeout: 15_000 })).resolves.toBe('(end-to-end encrypted, v2)')
        const atErin = await until(async () => (await Bun.sleep(50), await erin.poll()).messages[0] ?? null, 10_000, 'the message at erin')
        expect(atErin).toMatchObject({ body: 'sealed although erin declares nothing', encryption: { version: 2, sender_verified: true } })

        // 4. failures first (the inbox shows the newest on top): a tampered ciphertext, an unknown version,
        // a message sealed for another key
        const sealed = bob.encryption.api.sealMessage({ version: 3, sender: bob.transport.keys, recipientKey: consoleKeys.publicKey, body: { text: 'tampered' } })
        const ct = Buffer.from(sealed.body.ct, 'base64url')
        ct[20] ^= 1
        const tampered = await bob.send({ recipient_key: consoleKeys.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { ...sealed.body, ct: ct.toString('base64url') } })
        const future = await bob.send({ recipient_key: consoleKeys.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 9, enc: sealed.body.enc, ct: sealed.body.ct } })
        const otherKey = bob.encryption.api.sealMessage({ version: 3, sender: bob.transport.keys, recipientKey: carol.publicKey, body: { text: 'for carol' } })
        const misdirected = await bob.send({ recipient_key: consoleKeys.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: otherKey.body })
        // 5. carol → console: v2; bob → console: v3 with an encrypted attachment
        const fromCarol = await carol.send({ recipient_key: consoleKeys.publicKey, content_type: 'text/plain', body: `v2 from carol ${MARK.clientV2Body}`, encrypt: 2 })
        const upload = await bob.uploadEncryptedBlob(new TextEncoder().encode(`report ${MARK.clientFile}\n`), { recipientKey: consoleKeys.publicKey })
        const fromBob = await bob.send({ recipient_key: consoleKeys.publicKey, body: { text: `hi console ${MARK.clientBody}` }, attachments: [upload.attachment] })

        await page.getByRole('link', { name: 'Inbox' }).click()
        for (const m of [fromBob, fromCarol, tampered, future, misdirected]) await card(m.message_id).waitFor({ timeout: 10_000 })
        expect(await card(fromBob.message_id).locator('.body').textContent()).toBe(`hi console ${MARK.clientBody}`)
        expect(await card(fromBob.message_id).locator('.lock.ok').textContent()).toContain('end-to-end encrypted (v3), sender verified')
        expect(await card(fromCarol.message_id).locator('.body').textContent()).toBe(`v2 from carol ${MARK.clientV2Body}`)
        expect(await card(fromCarol.message_id).locator('.lock.ok').textContent()).toContain('(v2), sender verified')
        for (const [m, reason] of [
          [tampered, 'authentication_failed'],
          [future, 'unsupported_version'],
          [misdirected, 'authentication_failed'],
        ] as const) {
          const c = card(m.message_id)
          expect(await c.locator('.lock.failed .reason').textContent()).toBe(reason)
          // never the envelope shown as if it were the text
          expect(await c.locator('.body').count()).toBe(0)
        }
        expect(await card(tampered.message_id).locator('.lock.failed').textContent()).toContain('tampered')
        expect(await card(future.message_id).locator('.lock.failed').textContent()).toContain('version')
        // the encrypted attachment downloads decrypted; it has no name, which the relay would see (§14.5)
        const blobId = upload.blob.blob_id
        const file = await downloaded(card(fromBob.message_id).getByRole('button', { name: `Download ${blobId}` }))
        // saved under the blob id (Chromium may add an extension from the content)
        expect(file.name).toStartWith(blobId)
        expect(file.text).toBe(`report ${MARK.clientFile}\n`)
        await page.evaluate(() => (globalThis as any).scrollTo(0, 0))
        await shot('inbox-encrypted', false)
        await page.emulateMedia({ colorScheme: 'dark' })
        await shot('inbox-encrypted-dark', false)
        await page.emulateMedia({ colorScheme: 'light' })
        for (const m of [fromBob, fromCarol, tampered, future, misdirected]) await card(m.message_id).getByRole('button', { name: 'Ack' }).click()

        // 6. what the relay can see: every message, encrypted ones as ciphertext only
        await page.getByRole('link', { name: 'What the relay sees' }).click()
        const row = (id: string) => page.locator(`tr[data-message-id="${id}"]`)
        await row(toBob).waitFor({ timeout: 10_000 })
        await row(fromBob.message_id).waitFor()
        expect(await row(toBob).getAttribute('class')).toBe('sealed')
        expect(await row(toBob).locator('.body-cell').textContent()).toContain('ciphertext')
        expect(await row(toBob).textContent()).toContain(atBob.attachments![0]!.blob_id)
        expect(await row(toBob).textContent()).not.toContain(MARK.consoleFileName)
        expect(await row(toBob).textContent()).not.toContain(MARK.consoleBody)
        expect(await row(fromBob.message_id).textContent()).not.toContain(MARK.clientBody)
        const plainRow = page.locator('tr.plain')
        expect(await plainRow.count()).toBe(1)
        expect(await plainRow.locator('.body-cell').textContent()).toContain('readable')
        await shot('relay-sees', false)
        // the stored envelope of the newest message, opened: ciphertext
        await row(fromBob.message_id).locator('details').evaluate((d: any) => (d.open = true))
        expect(await row(fromBob.message_id).locator('pre.stored').textContent()).toContain('"ct"')
        await row(toBob).locator('details').evaluate((d: any) => (d.open = true))
        const storedToBob = JSON.parse((await row(toBob).locator('pre.stored').textContent()) as string)
        expect(storedToBob.attachments).toEqual([expect.objectContaining({ blob_id: atBob.attachments![0]!.blob_id, encrypted: true })])
        expect(Object.keys(storedToBob.attachments[0])).not.toContain('filename')

        // 7. a key stored before the console encrypted (no X25519 half): it says why, until re-imported
        await page.evaluate(async () => {
          const { indexedDB } = globalThis as any
          await new Promise<void>((resolve) => {
            const open = indexedDB.open('agent-relay-console')
            open.onsuccess = () => {
              const store = open.result.transaction('keys', 'readwrite').objectStore('keys')
              const get = store.get('current')
              get.onsuccess = () => {
                const { agreement_key: _, ...old } = get.result
                store.put(old, 'current').onsuccess = () => resolve()
              }
            }
          })
        })
        await page.reload()
        await expect(page.locator('.no-decrypt').textContent({ timeout: 10_000 })).resolves.toContain('Import its key file again')
        await page.getByRole('link', { name: 'Inbox' }).click()
        await page.getByRole('button', { name: 'Show delivered messages' }).click()
        await card(fromBob.message_id).waitFor({ timeout: 10_000 })
        expect(await card(fromBob.message_id).locator('.lock.failed .reason').textContent()).toBe('no_key')
        expect(await card(fromBob.message_id).locator('.body').count()).toBe(0)
        await shot('inbox-old-key', false)
        await page.getByRole('button', { name: 'Forget' }).click()
        await page.getByLabel('…or paste its content').fill(encodeKeyFile(consoleKeys))
        await page.getByRole('button', { name: 'Import' }).click()
        await page.locator('#public-key').waitFor()
        expect(await page.locator('.no-decrypt').count()).toBe(0)
        await page.getByRole('link', { name: 'Inbox' }).click()
        await page.getByRole('button', { name: 'Show delivered messages' }).click()
        await card(fromBob.message_id).waitFor({ timeout: 10_000 })
        expect(await card(fromBob.message_id).locator('.body').textContent()).toBe(`hi console ${MARK.clientBody}`)

        if (process.env.UPDATE_SCREENSHOTS === '1') for (const [name, file] of Object.entries(DOC_SHOTS)) copyFileSync(join(ARTIFACTS, `${name}.png`), join(ROOT, 'docs', 'img', file))
        expect(errors).toEqual([])
      } finally {
        await close()
      }

    },
    180_000,
  )

  test.skipIf(!hasChromium)(
    'console ⇄ CLI: encrypted both ways with an attachment, decrypted by the other side',
    async () => {
      const consoleKeys = generateKeyPair()
      const cliDir = join(dir, 'cli')
      mkdirSync(cliDir, { recursive: true })
      const cliKey = (await runCli(['keygen', '--out', 'dave.key'], { cwd: cliDir })).stdout.trim()
      const dave = (args: string[]) => runCli([...args, '--relay', relay.url, '--key', 'dave.key'], { cwd: cliDir })
      expect((await dave(['profile', 'set', '--encryption', 'accept'])).code).toBe(0)
      const { page, close } = await openConsole(relay.url, consoleKeys)
      try {
        // console → CLI
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(cliKey)
        await page.getByLabel('Body', { exact: true }).fill(`for dave ${MARK.consoleToCli}`)
        await page.getByLabel('Attachments').setInputFiles({ name: `${MARK.consoleToCliFileName}.txt`, mimeType: 'text/plain', buffer: Buffer.from(`file for dave ${MARK.consoleToCliFile}\n`) })
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        await expect(page.locator('.sent-how').textContent({ timeout: 15_000 })).resolves.toBe('(end-to-end encrypted, v3)')
        const polled = await dave(['poll', '--json'])
        expect(polled.code).toBe(0)
        const [atDave] = JSON.parse(polled.stdout).messages
        expect(atDave).toMatchObject({ sender_key: consoleKeys.publicKey, body: `for dave ${MARK.consoleToCli}`, encryption: { version: 3, sender_verified: true } })
        expect(atDave.attachments[0]).toMatchObject({ encrypted: true })
        expect(Object.keys(atDave.attachments[0])).not.toContain('filename')
        const got = await dave(['download', atDave.attachments[0].blob_id, '--message', atDave.message_id, '-o', 'got.txt'])
        expect([got.code, got.stderr]).toEqual([0, ''])
        expect(readFileSync(join(cliDir, 'got.txt'), 'utf8')).toBe(`file for dave ${MARK.consoleToCliFile}\n`)

        // CLI → console (the console's key declared support when it was imported)
        writeFileSync(join(cliDir, 'from-dave.txt'), `file from dave ${MARK.cliToConsoleFile}\n`)
        const sent = await dave(['send', '--to', consoleKeys.publicKey, '--text', `from dave ${MARK.cliToConsole}`, '--attach', 'from-dave.txt', '--json'])
        expect([sent.code, sent.stderr]).toEqual([0, ''])
        const id = JSON.parse(sent.stdout).message_id as string
        await page.getByRole('link', { name: 'Inbox' }).click()
        const c = page.locator(`article[data-message-id="${id}"]`)
        await c.waitFor({ timeout: 10_000 })
        expect(await c.locator('.lock.ok').textContent()).toContain('end-to-end encrypted (v3), sender verified')
        expect(await c.locator('.body').textContent()).toBe(`from dave ${MARK.cliToConsole}`)
        const waiting = page.waitForEvent('download')
        await c.locator('.attachments button').first().click()
        const d = await waiting
        expect(await Bun.file((await d.path()) as string).text()).toBe(`file from dave ${MARK.cliToConsoleFile}\n`)
      } finally {
        await close()
      }
    },
    120_000,
  )

  test.skipIf(!hasChromium)(
    'a plaintext send refused by an inbox that now requires encryption goes again encrypted, and its plaintext upload is removed',
    async () => {
      const keys = generateKeyPair()
      const { page, close } = await openConsole(relay.url, keys)
      try {
        const frank = new RelayClient({ baseUrl: relay.url, keys: generateKeyPair() })
        await frank.getAgent()
        // the console reads frank's profile (no declaration) and keeps it for a few minutes
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(frank.publicKey)
        await page.getByLabel('Recipient public key').dispatchEvent('change')
        await page.locator('#encryption-note', { hasText: 'Plaintext: the recipient declares no encryption support' }).waitFor({ timeout: 5000 })
        await frank.declareEncryption({ require: true })
        const FILE_BYTES = 5000
        await page.getByLabel('Body', { exact: true }).fill('for frank')
        await page.getByLabel('Attachments').setInputFiles({ name: 'frank.txt', mimeType: 'text/plain', buffer: Buffer.alloc(FILE_BYTES, 'f') })
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        await expect(page.locator('.sent-how').textContent({ timeout: 15_000 })).resolves.toBe('(end-to-end encrypted, v3)')
        const atFrank = await until(async () => (await Bun.sleep(50), await frank.poll()).messages[0] ?? null, 10_000, 'the message at frank')
        expect(atFrank).toMatchObject({ body: 'for frank', encryption: { version: 3, sender_verified: true } })
        expect(atFrank.attachments?.[0]).toMatchObject({ encrypted: true })
        // what the console's agent stores now: the encrypted file only (and one byte more, to read the figure)
        let used = ''
        const probe = new RelayClient({
          baseUrl: relay.url,
          keys,
          fetch: (async (req: Request) => {
            const res = await fetch(req)
            used = res.headers.get('x-m2m-storage-used') ?? used
            return res
          }) as typeof fetch,
        })
        await probe.uploadBlob(new Uint8Array([1]))
        expect(Number(used)).toBe(encryptedBlobSize(FILE_BYTES) + 1)
      } finally {
        await close()
      }
    },
    60_000,
  )

  test.skipIf(!hasChromium)(
    'MRP v2 with an independent implementation (@hpke/core): the console opens what it sends, and it opens what the console sends',
    async () => {
      const keys = generateKeyPair()
      const { page, close } = await openConsole(relay.url, keys)
      try {
        const them = new IndependentAgent(relay.url, generateKeyPair())
        await them.declare([2])
        // independent → console: a v2 body and an attachment, sealed and wrapped with HPKE Auth mode
        const file = new TextEncoder().encode('independent file\n'.repeat(300))
        const dek = new Uint8Array(crypto.getRandomValues(new Uint8Array(32)))
        const blobId = await them.upload(await writeEncryptedBlob(dek, file))
        const id = await them.send({
          recipient_key: keys.publicKey,
          content_type: ENCRYPTED_CONTENT_TYPE,
          body: await sealV2Body(them.keys, keys.publicKey, 'text/plain', 'from the independent side'),
          attachments: [{ blob_id: blobId, encrypted: true, ...(await wrapDekV2(them.keys, keys.publicKey, dek)) }],
        })
        await page.getByRole('link', { name: 'Inbox' }).click()
        const c = page.locator(`article[data-message-id="${id}"]`)
        await c.waitFor({ timeout: 10_000 })
        expect(await c.locator('.lock.ok').textContent()).toContain('end-to-end encrypted (v2), sender verified')
        expect(await c.locator('.body').textContent()).toBe('from the independent side')
        const waiting = page.waitForEvent('download')
        await c.locator('.attachments button').first().click()
        expect(new Uint8Array(await Bun.file((await (await waiting).path()) as string).arrayBuffer())).toEqual(file)

        // console → independent (declares v2 only): the independent side opens the body and the file
        await page.getByRole('link', { name: 'Send' }).click()
        await page.getByLabel('Recipient public key').fill(them.publicKey)
        await page.getByLabel('Body', { exact: true }).fill('from the console')
        const sentFile = Buffer.from('console file\n'.repeat(7000))
        await page.getByLabel('Attachments').setInputFiles({ name: 'c.txt', mimeType: 'text/plain', buffer: sentFile })
        await page.getByRole('button', { name: 'Send', exact: true }).click()
        await expect(page.locator('.sent-how').textContent({ timeout: 15_000 })).resolves.toBe('(end-to-end encrypted, v2)')
        const m = await them.getMessage((await page.locator('.sent-id').textContent()) as string)
        expect(m).toMatchObject({ sender_key: keys.publicKey, content_type: ENCRYPTED_CONTENT_TYPE, body: { v: 2, ct_content_type: 'text/plain' } })
        expect(await openV2Body(them.keys, m)).toBe('from the console')
        const got = await readEncryptedBlob(await unwrapDekV2(them.keys, keys.publicKey, m.attachments[0]), await them.download(m.attachments[0].blob_id))
        expect(Buffer.from(got).equals(sentFile)).toBe(true)
      } finally {
        await close()
      }
    },
    60_000,
  )

  test.skipIf(!hasChromium)('nothing the browser, the client or the CLI encrypted is readable on the relay’s disk', () => {
    const files = filesUnder(join(dir, 'data'))
    expect(files.some((f) => f.endsWith('.db'))).toBe(true)
    expect(files.length).toBeGreaterThan(2) // the database and blob files
    const found: string[] = []
    for (const f of files) {
      const text = readFileSync(f).toString('latin1')
      for (const marker of Object.values(MARK)) if (text.includes(marker)) found.push(`${marker} in ${f}`)
    }
    expect(found).toEqual([])
    // the check can see a plaintext: the one sent in plaintext is on disk
    expect(files.some((f) => readFileSync(f).toString('latin1').includes('a plaintext note'))).toBe(true)
  })
})
