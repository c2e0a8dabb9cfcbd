/** The shared progress bar: draws on a terminal, silent when piped. */
import { describe, expect, test } from 'bun:test'
import { spawnSync } from 'bun'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { countingStream, createProgress, progressLine } from '../../src/cli/progress.ts'
import { ROOT } from '../support/binary.ts'
import { tempDir } from '../support/harness.ts'

function fakeStream(isTTY: boolean) {
  let written = ''
  return { stream: { write: (s: string) => (written += s), isTTY, columns: 200 }, written: () => written }
}

describe('progress', () => {
  test('the frame text: bar, percentage, bytes and rate; without a total only bytes and rate', () => {
    expect(progressLine('upload', 512 * 1024, 1024 * 1024, 1000)).toBe('upload [############------------]  50% 512 KiB / 1.0 MiB 512 KiB/s')
    expect(progressLine('download', 3 * 1024 * 1024, undefined, 2000)).toBe('download 3.0 MiB 1.5 MiB/s')
    expect(progressLine('x', 10, 10, 0)).toBe('x [########################] 100% 10 B / 10 B')
  })

  test('on a terminal: redraws in place at most every interval, then ends the line', () => {
    let t = 0
    const { stream, written } = fakeStream(true)
    const p = createProgress({ label: 'up', total: 100, stream, now: () => t, intervalMs: 100 })
    p.add(10) // first frame draws at once
    t = 50
    p.add(10) // too soon
    t = 150
    p.add(30)
    p.done()
    const frames = written().split('\r').filter(Boolean)
    expect(frames).toHaveLength(3)
    expect(frames[0]).toStartWith('up [##')
    expect(frames[0]).toEndWith('\x1b[K')
    expect(frames[1]).toContain(' 50% ')
    expect(frames[2]).toEndWith('\x1b[K\n')
    expect(p.bytes).toBe(50)
  })

  test('piped: writes nothing at all', () => {
    const { stream, written } = fakeStream(false)
    const p = createProgress({ label: 'up', total: 100, stream })
    p.add(100)
    p.done()
    expect(written()).toBe('')
  })

  test('fail erases the bar so an error line starts clean', () => {
    const { stream, written } = fakeStream(true)
    const p = createProgress({ label: 'up', stream })
    p.add(1)
    p.fail()
    expect(written()).toEndWith('\r\x1b[K')
  })

  test('countingStream counts the bytes that pass through', async () => {
    const p = createProgress({ label: 'x', stream: fakeStream(false).stream })
    const body = new Blob([new Uint8Array(1000), new Uint8Array(234)]).stream().pipeThrough(countingStream(p))
    expect((await new Response(body).arrayBuffer()).byteLength).toBe(1234)
    expect(p.bytes).toBe(1234)
  })

  test('a real terminal gets the bar on stderr; a pipe gets nothing', () => {
    if (!Bun.which('script')) return
    const dir = tempDir('relay-progress-')
    const script = join(dir, 'demo.ts')
    writeFileSync(
      script,
      `import { createProgress } from '${join(ROOT, 'src/cli/progress.ts')}'\n` +
        `const p = createProgress({ label: 'demo', total: 4, intervalMs: 0 })\n` +
        `for (let i = 0; i < 4; i++) p.add(1)\np.done()\nprocess.stdout.write('result\\n')\n`,
    )
    const piped = spawnSync([process.execPath, script], { stderr: 'pipe', stdout: 'pipe' })
    expect(piped.stdout.toString()).toBe('result\n')
    expect(piped.stderr.toString()).toBe('')
    const tty = spawnSync(['script', '-qec', `'${process.execPath}' '${script}'`, '/dev/null'], { stdout: 'pipe' })
    const out = tty.stdout.toString()
    expect(out).toContain('demo [######------------------]  25%')
    expect(out).toContain('demo [########################] 100% 4 B / 4 B')
    expect(out).toContain('result')
    rmSync(dir, { recursive: true })
  })
})
