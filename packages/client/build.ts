/**
 * Builds the installable client from src/client: one ES module for Node ≥ 20 and Bun (dependencies
 * bundled in except `ws`, a dependency loaded only where the runtime has no WebSocket), its type
 * declarations and a copy of the relay's LICENSE. Run from the repository: `npm run build:client`,
 * then `npm pack` in packages/client.
 */
import { spawnSync } from 'bun'
import { copyFileSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'

const here = import.meta.dir
const root = join(here, '..', '..')
const dist = join(here, 'dist')

const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
if (pkg.version !== rootPkg.version) throw new Error(`packages/client/package.json has version ${pkg.version}, the relay ${rootPkg.version}: keep them equal`)

rmSync(dist, { recursive: true, force: true })
copyFileSync(join(root, 'LICENSE'), join(here, 'LICENSE'))

const built = await Bun.build({
  entrypoints: [join(root, 'src/client/index.ts')],
  outdir: dist,
  naming: 'index.js',
  target: 'node',
  format: 'esm',
  external: ['ws'],
})
if (!built.success) throw new AggregateError(built.logs, 'bundling the client failed')

const tsc = spawnSync([process.execPath, join(root, 'node_modules/typescript/bin/tsc'), '-p', join(here, 'tsconfig.json')], { cwd: root, stdout: 'pipe', stderr: 'pipe' })
if (tsc.exitCode !== 0) throw new Error(`tsc failed:\n${tsc.stdout}${tsc.stderr}`)

/** The sources import with .ts extensions (Bun runs them as they are); the declarations must name .js. */
const ALLOWED = /^(client\/[a-z-]+|crypto\/[a-z-]+|auth\/(sign|canonical|key-file-formats)|lib\/base64url)\.d\.ts$/
function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? walk(path) : [path]
  })
}
const types = join(dist, 'types')
for (const file of walk(types)) {
  const name = relative(types, file)
  // a declaration from outside these means the client's types reach into server code
  if (!ALLOWED.test(name)) throw new Error(`the client's declarations include ${name}, which is not client code`)
  writeFileSync(file, readFileSync(file, 'utf8').replace(/(from\s+['"]\.{1,2}\/[^'"]+?)\.ts(['"])/g, '$1.js$2'))
}
console.log(`built ${relative(root, dist)}: index.js (${(statSync(join(dist, 'index.js')).size / 1024).toFixed(0)} KiB) and ${walk(types).length} declaration files`)
