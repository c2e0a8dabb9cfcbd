#!/usr/bin/env bun
/**
 * `npm run release`: standalone `relay` executables for Linux on x64, arm64 (Raspberry Pi 4/5, Graviton,
 * Ampere) and x64-baseline (CPUs without AVX2, e.g. older Atom/Celeron boxes), plus a SHA256SUMS file
 * that `sha256sum -c` checks.
 *
 * Cross-compiling needs Bun's runtime for each target. On the first build for a target, `bun build`
 * downloads it from the npm registry (the `@oven/bun-linux-aarch64`, `@oven/bun-linux-x64-baseline` …
 * packages, version matching the pinned `bun`) and keeps it in ~/.bun/install/cache, so later builds
 * work offline. No other host is involved.
 *
 * Usage: bun scripts/release.ts [--out DIR] [--target NAME …]   (default dist/release, every target)
 */
import { spawnSync } from 'bun'
import { createHash } from 'node:crypto'
import { createReadStream, existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { VERSION } from '../src/version.ts'

/** Release file suffix → Bun compile target. */
export const TARGETS: Record<string, string> = {
  'linux-x64': 'bun-linux-x64',
  'linux-arm64': 'bun-linux-arm64',
  'linux-x64-baseline': 'bun-linux-x64-baseline',
}

const ROOT = resolve(import.meta.dir, '..')

export const releaseName = (target: string) => `relay-${VERSION}-${target}`

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

export async function release(outDir: string, targets: string[]): Promise<{ file: string; sizeBytes: number; sha256: string }[]> {
  mkdirSync(outDir, { recursive: true })
  const built: { file: string; sizeBytes: number; sha256: string }[] = []
  for (const target of targets) {
    const bunTarget = TARGETS[target]
    if (!bunTarget) throw new Error(`unknown target "${target}" (one of ${Object.keys(TARGETS).join(', ')})`)
    const out = join(outDir, releaseName(target))
    // the same flags as `npm run build`: minified, bytecode for a faster start, source map for stack traces
    const r = spawnSync(
      [process.execPath, 'build', '--compile', '--minify', '--sourcemap', '--bytecode', `--target=${bunTarget}`, join(ROOT, 'src/main.ts'), '--outfile', out],
      { cwd: ROOT, stdout: 'pipe', stderr: 'pipe' },
    )
    if (r.exitCode !== 0) throw new Error(`bun build --target=${bunTarget} failed:\n${r.stderr.toString()}${r.stdout.toString()}`)
    // the map is embedded in the executable; the copy beside it is not a release file
    if (existsSync(`${out}.map`)) rmSync(`${out}.map`)
    built.push({ file: releaseName(target), sizeBytes: statSync(out).size, sha256: await sha256(out) })
  }
  writeFileSync(join(outDir, 'SHA256SUMS'), built.map((b) => `${b.sha256}  ${b.file}\n`).join(''))
  return built
}

if (import.meta.main) {
  const args = process.argv.slice(2)
  let outDir = join(ROOT, 'dist', 'release')
  const targets: string[] = []
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--out') outDir = resolve(args[++i] ?? '')
    else if (args[i] === '--target') targets.push(args[++i] ?? '')
    else {
      console.error(`relay: error: unknown argument ${args[i]} (usage: bun scripts/release.ts [--out DIR] [--target NAME …])`)
      process.exit(2)
    }
  }
  try {
    const built = await release(outDir, targets.length ? targets : Object.keys(TARGETS))
    for (const b of built) console.log(`${b.file}  ${(b.sizeBytes / 1024 / 1024).toFixed(1)} MiB  sha256 ${b.sha256}`)
    console.log(`wrote ${join(outDir, 'SHA256SUMS')}; check with: cd ${outDir} && sha256sum -c SHA256SUMS`)
  } catch (err) {
    console.error(`relay: error: ${(err as Error).message}`)
    process.exit(1)
  }
}
