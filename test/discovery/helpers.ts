/** Shared set-up for the discovery tests: agents with profiles, and raw discovery calls. */
import type { AgentPatchInput, RelayClient } from '../../src/client/index.ts'
import type { TestRelay } from '../support/harness.ts'

/** A new agent with this profile (public unless the patch says otherwise); returns its client. */
export async function agentWith(t: TestRelay, patch: AgentPatchInput): Promise<RelayClient> {
  const c = t.client()
  await c.updateProfile({ visibility: 'public', ...patch })
  return c
}

/** GET /v1/discover with a raw query string; returns status and parsed body. */
export async function discoverRaw(c: RelayClient, query: string): Promise<{ status: number; body: any }> {
  const res = await c.transport.send('GET', `/v1/discover${query}`)
  return { status: res.status, body: await res.json() }
}

/** Public keys of one discover page, in order. */
export async function keysOf(c: RelayClient, query: Parameters<RelayClient['discover']>[0]): Promise<string[]> {
  return (await c.discover({ limit: 100, ...query })).agents.map((a) => a.public_key)
}

/** Brings an agent's last_active_at to the clock's time: past the 10 s coalescing window, then a signed call. */
export async function touch(t: TestRelay, c: RelayClient): Promise<void> {
  t.clock.advance(10_001)
  await c.getAgent()
  // the last-active write is made in the background while the request is answered: wait until the
  // database holds it, so the next read sees the agent moved
  const now = t.clock.now()
  for (let i = 0; i < 500; i++) {
    const [row] = await t.sql<{ last_active_at: number }>('SELECT last_active_at FROM agents WHERE public_key = ?', [c.publicKey])
    if (row?.last_active_at === now) return
    await Bun.sleep(2)
  }
  throw new Error('the last-active write never landed')
}

export const sorted = (xs: string[]) => [...xs].sort()
