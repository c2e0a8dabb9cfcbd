/**
 * In-process notifications that cross layers after a commit: delivery (sockets, webhooks) listens,
 * services emit. Listeners run synchronously and must not throw into the emitter.
 */
export interface RelayEventMap {
  /** A message was committed for a recipient. */
  messageAccepted: { messageId: string; recipientKey: string; senderKey: string }
  /** An agent was deleted or suspended: close its sockets, stop its deliveries. */
  agentGone: { publicKey: string; reason: 'deleted' | 'suspended' }
}

type Listener<T> = (event: T) => void

export class RelayEvents {
  private listeners: { [K in keyof RelayEventMap]?: Listener<RelayEventMap[K]>[] } = {}
  constructor(private readonly onListenerError: (err: unknown) => void = () => {}) {}

  on<K extends keyof RelayEventMap>(name: K, listener: Listener<RelayEventMap[K]>): () => void {
    const list = (this.listeners[name] ??= []) as Listener<RelayEventMap[K]>[]
    list.push(listener)
    return () => list.splice(list.indexOf(listener) >>> 0, 1)
  }

  emit<K extends keyof RelayEventMap>(name: K, event: RelayEventMap[K]): void {
    for (const listener of (this.listeners[name] ?? []) as Listener<RelayEventMap[K]>[]) {
      try {
        listener(event)
      } catch (err) {
        this.onListenerError(err)
      }
    }
  }
}
