/**
 * Signals within one process: the relay on SQLite, where every writer is this process (operator
 * changes made by `relay admin` from another process arrive through the agent change watcher). A
 * listener that throws is reported, never passed to the announcer.
 */
import type { MessageRecord } from '../../services/models/records.ts'
import type { Signals } from '../../services/ports.ts'

type GoneListener = (publicKey: string, reason: 'deleted' | 'suspended') => void

export class LocalSignals implements Signals {
  private readonly messageListeners: ((m: MessageRecord, origin: 'local' | 'remote') => void)[] = []
  private readonly goneListeners: GoneListener[] = []

  constructor(private readonly onListenerError: (err: unknown) => void = () => {}) {}

  messageCommitted(message: MessageRecord): void {
    for (const l of this.messageListeners) this.call(() => l(message, 'local'))
  }

  onMessage(listener: (message: MessageRecord, origin: 'local' | 'remote') => void): void {
    this.messageListeners.push(listener)
  }

  agentGone(publicKey: string, reason: 'deleted' | 'suspended'): void {
    for (const l of this.goneListeners) this.call(() => l(publicKey, reason))
  }

  onAgentGone(listener: GoneListener): void {
    this.goneListeners.push(listener)
  }

  /** One process: every message is committed here, and handed over as it is; nothing to filter. */
  wantRecipients(_filter: (recipientKey: string) => boolean): void {}

  /** One process hears every notice as it is made: nothing is ever missed, so nothing to resync. */
  onResync(_listener: () => void): void {}

  async close(): Promise<void> {}

  private call(fn: () => void): void {
    try {
      fn()
    } catch (err) {
      this.onListenerError(err)
    }
  }
}
