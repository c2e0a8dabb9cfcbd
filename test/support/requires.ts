/**
 * Tests that need an outside program (a browser, a proxy, qemu): on a machine without it they are
 * skipped with one line saying why; under CI=true a missing program is a failure, never a skip
 * (.ci/run installs every one of them).
 */
export function requireProgram(program: string, path: string | null | undefined, purpose: string): boolean {
  if (path) return true
  const line = `${purpose}: skipped, ${program} is not installed (bash .ci/run installs it)`
  if (process.env.CI === 'true') throw new Error(line.replace('skipped', 'cannot run under CI=true'))
  console.log(line)
  return false
}
