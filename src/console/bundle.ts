/**
 * The console's script, bundled when the relay itself is bundled: imported as a macro
 * (`with { type: 'macro' }`), so `bun build --compile` runs it once and embeds the result in the
 * executable, and `bun src/main.ts` runs it as the relay's source is loaded. Either way the relay
 * serves the console with no build step of its own and no file beside it.
 */
import { join } from 'node:path'

/** The console's browser code (src/console/app), minified into one ES module. */
export function consoleScript(): string {
  // Bun.build cannot run inside a macro (the bundler waits for the macro): the CLI can
  const entry = join(import.meta.dir, 'app', 'main.ts')
  const r = Bun.spawnSync([process.execPath, 'build', entry, '--target=browser', '--format=esm', '--minify'], { stdout: 'pipe', stderr: 'pipe', env: { ...process.env, BUN_BE_BUN: '1' } })
  if (r.exitCode !== 0) throw new Error(`bundling the console failed: ${r.stderr.toString()}`)
  return r.stdout.toString()
}
