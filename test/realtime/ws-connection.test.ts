/**
 * The push state of one connection, with a fake socket and backlog: where backlog and live events
 * overlap nothing is pushed twice, and under backpressure nothing is lost or repeated.
 */
import { describe, expect, test } from 'bun:test'
import { Connection, type PushSocket, type PushSource } from '../../src/delivery/ws-connection.ts'
import type { AgentRecord, MessageRecord, MessagePosition as Position } from '../../src/services/models/records.ts'

const KEY = 'k'.repeat(43)
const turn = () => new Promise((r) => setImmediate(r))
/** Lets reads of the (async) backlog and their pushes finish. */
const settle = async () => {
  for (let i = 0; i < 4; i++) await turn()
}

function row(n: number, createdAt = 1000 + n): MessageRecord {
  return {
    messageId: `msg_1_${String(n).padStart(12, '0')}`,
    senderKey: 's',
    recipientKey: KEY,
    contentType: 'application/json',
    body: String(n),
    attachments: null,
    threadId: null,
    inReplyTo: null,
    metadata: null,
    status: 'sent',
    createdAt,
    expiresAt: 10_000_000,
    deliveredAt: null,
  }
}

/** A socket whose send result the test controls, and a store of `sent` rows. */
function setup(retryMs: number[] = [5, 5, 5]) {
  const sent: string[] = []
  const closed: number[] = []
  let mode: 'ok' | 'queue' | 'drop' = 'ok'
  /** Reads that fail from now on (backlog, find), like a database that went away. */
  let failReads = 0
  const fail = () => {
    if (failReads > 0) {
      failReads--
      throw new Error('connection closed')
    }
  }
  const socket: PushSocket = {
    send(text) {
      if (mode === 'drop') return 0
      sent.push(JSON.parse(text).n)
      return mode === 'queue' ? -1 : text.length
    },
    close(code) {
      closed.push(code ?? 1000)
    },
    terminate() {},
    ping() {},
  }
  const store: MessageRecord[] = []
  let onBacklog: (() => void) | null = null
  const source: PushSource = {
    async backlog(_key, after: Position | null, limit) {
      fail()
      const rows = store
        .filter((r) => !after || r.createdAt > after.createdAt || (r.createdAt === after.createdAt && r.messageId > after.messageId))
        .sort((a, b) => a.createdAt - b.createdAt || (a.messageId < b.messageId ? -1 : 1))
        .slice(0, limit)
      onBacklog?.()
      return rows
    },
    find: async (id) => {
      fail()
      return store.find((r) => r.messageId === id) ?? null
    },
    frame: (r) => JSON.stringify({ n: r.messageId }),
    now: () => 5000,
  }
  const conn = new Connection(1, socket, source, retryMs)
  const commit = (r: MessageRecord) => store.push(r)
  const announce = (r: MessageRecord) => conn.offer(r, JSON.stringify({ n: r.messageId }))
  return {
    conn,
    sent,
    closed,
    store,
    failNextReads: (n: number) => (failReads = n),
    commit,
    announce,
    setMode: (m: typeof mode) => (mode = m),
    beforeBacklog: (fn: (() => void) | null) => (onBacklog = fn),
    open: () => conn.open({ publicKey: KEY } as AgentRecord),
  }
}

describe('backlog and live overlap', () => {
  test('a message committed before the backlog read and announced after it is pushed once', async () => {
    const s = setup()
    const a = row(1)
    s.commit(a)
    s.open() // backlog carries a
    s.announce(a) // its announcement comes after, while the backlog is read
    await settle()
    expect(s.sent).toEqual([a.messageId])
    s.announce(a) // or even after the sync ended
    s.announce(row(2)) // a genuinely new message afterwards is pushed
    expect(s.sent).toEqual([a.messageId, row(2).messageId])
  })

  test('messages announced during a multi-page sync are held and pushed after it, once', async () => {
    const s = setup()
    for (let i = 0; i < 150; i++) s.commit(row(i))
    s.open() // first page of 100 now, the rest on the next turn
    await turn()
    expect(s.sent.length).toBe(100)
    const late = row(200, 500) // created before the cursor, committed during the sync: no page will carry it
    s.commit(late)
    s.announce(late)
    s.announce(row(120)) // a page will carry it: must not come twice
    const newer = row(300)
    s.commit(newer)
    s.announce(newer)
    await settle()
    expect(s.sent.length).toBe(152)
    expect(new Set(s.sent).size).toBe(152)
    expect(s.sent.slice(0, 150)).toEqual(Array.from({ length: 150 }, (_, i) => row(i).messageId)) // the backlog, in order
    expect(s.sent).toContain(late.messageId)
    expect(s.sent).toContain(newer.messageId)
  })
})

describe('backpressure', () => {
  test('a queued send stops pushes; what is announced meanwhile is caught up after drain, once and in order', async () => {
    const s = setup()
    s.open()
    await settle()
    s.commit(row(1))
    s.announce(row(1))
    s.setMode('queue')
    s.commit(row(2))
    s.announce(row(2)) // queued by the socket: counts as pushed, pushes stop
    expect(s.conn.isCongested).toBe(true)
    for (const n of [3, 4, 5]) {
      s.commit(row(n))
      s.announce(row(n))
    }
    expect(s.sent).toEqual([row(1).messageId, row(2).messageId])
    s.setMode('ok')
    s.conn.drained()
    await settle()
    expect(s.sent).toEqual([1, 2, 3, 4, 5].map((n) => row(n).messageId))
    expect(s.conn.isCongested).toBe(false)
  })

  test('a dropped send is pushed again after drain', async () => {
    const s = setup()
    s.open()
    await settle()
    s.setMode('drop')
    s.commit(row(1))
    s.announce(row(1))
    expect(s.sent).toEqual([])
    s.setMode('ok')
    s.conn.drained()
    await settle()
    expect(s.sent).toEqual([row(1).messageId])
  })

  test('backpressure in the middle of the backlog resumes from where it stopped', async () => {
    const s = setup()
    for (let i = 0; i < 10; i++) s.commit(row(i))
    s.setMode('queue')
    s.open()
    await settle()
    expect(s.sent).toEqual([row(0).messageId])
    s.setMode('ok')
    s.conn.drained()
    await settle()
    expect(s.sent).toEqual(Array.from({ length: 10 }, (_, i) => row(i).messageId))
  })

  test('a message acked (no longer sent) while the socket was congested is not pushed', async () => {
    const s = setup()
    s.open()
    await settle()
    s.setMode('queue')
    s.commit(row(1))
    s.announce(row(1))
    s.commit(row(2))
    s.announce(row(2))
    s.store.splice(s.store.indexOf(s.store.find((r) => r.messageId === row(2).messageId)!), 1) // polled meanwhile
    s.setMode('ok')
    s.conn.drained()
    await settle()
    expect(s.sent).toEqual([row(1).messageId])
  })
})

describe('failed backlog reads', () => {
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms))

  test('a resync whose read fails is retried: every message committed meanwhile is pushed, once', async () => {
    const s = setup()
    s.open()
    await settle()
    s.commit(row(1))
    s.announce(row(1))
    expect(s.sent).toEqual([row(1).messageId])
    // the cluster link came back: the backlog is read again, and that read fails twice
    s.failNextReads(2)
    s.conn.resync()
    for (const n of [2, 3, 4, 5, 6]) {
      s.commit(row(n))
      s.announce(row(n)) // held while the sync is retried
    }
    await wait(60)
    await settle()
    expect(s.sent).toEqual([1, 2, 3, 4, 5, 6].map((n) => row(n).messageId))
    expect(s.closed).toEqual([])
    // and live pushes go on
    s.commit(row(7))
    s.announce(row(7))
    expect(s.sent.at(-1)).toBe(row(7).messageId)
  })

  test('a failed read of a held message is retried rather than dropping the held ones', async () => {
    const s = setup()
    for (let i = 0; i < 3; i++) s.commit(row(i))
    s.beforeBacklog(() => {
      // announced while the first page is read: held, then read again by id when the sync ends
      s.commit(row(10))
      s.announce(row(10))
      s.beforeBacklog(null)
      s.failNextReads(1) // ... and that read fails once
    })
    s.open()
    await wait(40)
    await settle()
    expect(s.sent).toEqual([0, 1, 2, 10].map((n) => row(n).messageId))
  })

  test('when every retry fails the socket is closed with 1011 so that the client reconnects', async () => {
    const s = setup([5, 5])
    s.failNextReads(100)
    s.open()
    await wait(60)
    await settle()
    expect(s.closed).toEqual([1011])
  })
})
