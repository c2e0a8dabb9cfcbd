/** Open WebSockets per agent within one process (the relay on SQLite). */
import type { ConnectionRegistry } from '../../services/ports.ts'

export class LocalConnectionRegistry implements ConnectionRegistry {
  private readonly byAgent = new Map<string, Set<string>>()

  async tryAdd(publicKey: string, connectionId: string, limit: number): Promise<boolean> {
    const set = this.byAgent.get(publicKey) ?? new Set<string>()
    if (set.size >= limit) return false
    set.add(connectionId)
    this.byAgent.set(publicKey, set)
    return true
  }

  async remove(publicKey: string, connectionId: string): Promise<void> {
    const set = this.byAgent.get(publicKey)
    set?.delete(connectionId)
    if (set?.size === 0) this.byAgent.delete(publicKey)
  }

  async heartbeat(): Promise<void> {}
}
