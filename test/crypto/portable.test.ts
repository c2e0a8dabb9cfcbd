// The formats and the pure primitives must bundle for a browser (the console uses them): no node: modules.
import { expect, test } from 'bun:test'
import { join } from 'node:path'

test('src/crypto (formats + pure primitives) builds for the browser without node: modules', async () => {
  const root = join(import.meta.dir, '../../src/crypto')
  const built = await Bun.build({ entrypoints: [join(root, 'index.ts'), join(root, 'pure.ts')], target: 'browser' })
  expect(built.logs.filter((l) => l.level === 'error').map(String)).toEqual([])
  expect(built.success).toBe(true)
  const text = (await Promise.all(built.outputs.map((o) => o.text()))).join('\n')
  expect(text).not.toMatch(/from\s*["']node:|require\(["'](node:)?(crypto|fs|buffer)["']\)/)
  // Bun substitutes a browser polyfill for node:crypto (almost 1 MB): its functions must not be in there
  expect(text).not.toContain('generateKeyPairSync')
  expect(text).not.toContain('createCipheriv')
  expect(text).toContain('HPKE-v1')
  expect(text).toContain('purePrimitives')
}, 30_000)
