/** The web console in Debian's Chromium, driven through playwright-core, for the browser tests. */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encodeKeyFile, type KeyPair } from '../../src/auth/sign.ts'

export const CHROMIUM = '/usr/bin/chromium'
export const chromiumPath = (): string | null => (existsSync(CHROMIUM) ? CHROMIUM : null)

export interface ConsolePage {
  page: import('playwright-core').Page
  context: import('playwright-core').BrowserContext
  /** The browser profile (its processes name it on their command line). */
  profileDir: string
  /** Uncaught errors of the page, from its first load on. */
  errors: string[]
  close(): Promise<void>
}

/**
 * Chromium with a fresh profile on the relay's console; with `keys`, the key is imported from its file
 * and the live connection is up before this returns.
 */
export async function openConsole(url: string, keys?: KeyPair): Promise<ConsolePage> {
  const { chromium } = await import('playwright-core')
  const profileDir = mkdtempSync(join(tmpdir(), 'relay-console-chromium-'))
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1100, height: 800 },
    acceptDownloads: true,
  })
  const page = context.pages()[0] ?? (await context.newPage())
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(String(e)))
  await page.goto(`${url}/console`)
  if (keys) {
    await page.getByLabel('…or paste its content').fill(encodeKeyFile(keys))
    await page.getByRole('button', { name: 'Import' }).click()
    await page.locator('#public-key').waitFor()
    await page.getByText('live', { exact: true }).waitFor()
  }
  return { page, context, profileDir, errors, close: async () => (await context.close(), rmSync(profileDir, { recursive: true, force: true })) }
}
