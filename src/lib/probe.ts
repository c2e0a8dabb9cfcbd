/**
 * A readiness probe: null when `probe` succeeds within `ms`; `late` when it has not settled by then
 * (it is left to finish on its own); else why it failed, after `failed`.
 */
export async function probeWithin(probe: Promise<unknown>, ms: number, late: string, failed: string): Promise<string | null> {
  const timeout = new Promise<'late'>((r) => setTimeout(() => r('late'), ms).unref?.())
  try {
    const outcome = await Promise.race([probe.then(() => 'ok' as const), timeout])
    if (outcome === 'late') {
      probe.catch(() => {})
      return late
    }
    return null
  } catch (err) {
    return `${failed}: ${(err as Error).message}`
  }
}
