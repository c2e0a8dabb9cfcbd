/**
 * WebSocket clients for tests: `WsProbe` over the runtime's WebSocket (records every frame and the
 * close), and `RawWs` over a plain TCP socket, which can stop reading and never answers pings — the
 * slow and dead consumers a browser-grade client cannot imitate.
 */
import { connect, type Socket } from 'node:net'
import { randomBytes } from 'node:crypto'
import { signWsAuth, type KeyPair } from '../../src/auth/sign.ts'
import type { TestRelay } from './harness.ts'
import { uniqueTimestamp } from './signed.ts'

export interface Closed {
  code: number
  reason: string
}

/** Waits until `check` returns (or resolves to) a value, polling every 5 ms; fails after `ms`. */
export async function until<T>(check: () => T | undefined | null | false | Promise<T | undefined | null | false>, ms = 3000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(5)
  }
}

/** A signed auth frame for `keys` at the relay's (fake) time, unique per key. */
export function authFrame(t: TestRelay, keys: KeyPair, timestamp?: string) {
  return signWsAuth(keys, timestamp ?? uniqueTimestamp(t.clock.now(), keys.publicKey))
}

export class WsProbe {
  readonly frames: any[] = []
  closed: Closed | null = null
  private seen = 0
  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (e) => this.frames.push(JSON.parse(String(e.data)))
    ws.onclose = (e) => (this.closed = { code: e.code, reason: e.reason })
  }

  static async open(url: string): Promise<WsProbe> {
    const ws = new WebSocket(url)
    const probe = new WsProbe(ws)
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve()
      ws.onerror = () => reject(new Error(`cannot connect to ${url}`))
    })
    return probe
  }

  /** Opens a socket and authenticates; fails unless the relay answers ok. */
  static async authed(t: TestRelay, url: string, keys: KeyPair): Promise<WsProbe> {
    const p = await WsProbe.open(url)
    p.send(authFrame(t, keys))
    const res = await p.next('auth_result')
    if (res.status !== 'ok') throw new Error(`auth failed: ${JSON.stringify(res)}`)
    return p
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' || frame instanceof Uint8Array ? frame : JSON.stringify(frame))
  }

  /** The next frame not yet taken (of `type` when given, skipping others). */
  async next(type?: string, ms = 3000): Promise<any> {
    return until(
      () => {
        while (this.seen < this.frames.length) {
          const f = this.frames[this.seen++]
          if (!type || f.type === type) return f
        }
        return undefined
      },
      ms,
      `a ${type ?? 'frame'} frame`,
    )
  }

  /** Frames that arrive from now until the pong of a ping sent now (what the relay sent before it). */
  async sync(): Promise<any[]> {
    const from = this.frames.length
    this.send({ type: 'ping' })
    const at = await until(() => {
      const i = this.frames.findIndex((f, n) => n >= from && f.type === 'pong')
      return i >= 0 ? i + 1 : undefined
    }, 3000, 'a pong')
    this.seen = Math.max(this.seen, at)
    return this.frames.slice(from, at - 1)
  }

  /** Message frames received so far (all of them, taken or not). */
  messages(): any[] {
    return this.frames.filter((f) => f.type === 'message').map((f) => f.message)
  }

  async waitClosed(ms = 3000): Promise<Closed> {
    return until(() => this.closed, ms, 'the socket to close')
  }

  close(): void {
    this.ws.close()
  }
}

/** A WebSocket client written on a TCP socket: masks its frames, decodes the relay's, ignores pings. */
export class RawWs {
  readonly texts: string[] = []
  closed = false
  closeCode: number | null = null
  private buf: Buffer = Buffer.alloc(0)
  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk))
    socket.on('close', () => (this.closed = true))
    socket.on('error', () => (this.closed = true))
  }

  static async open(port: number, path = '/v1/ws'): Promise<RawWs> {
    const socket = connect(port, '127.0.0.1')
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve())
      socket.once('error', reject)
    })
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    )
    const head = await new Promise<Buffer>((resolve) => socket.once('data', resolve))
    const end = head.indexOf('\r\n\r\n')
    if (!head.subarray(0, end).toString().startsWith('HTTP/1.1 101')) throw new Error(`no upgrade: ${head.toString()}`)
    const raw = new RawWs(socket)
    if (head.length > end + 4) raw.onData(head.subarray(end + 4))
    return raw
  }

  sendText(text: string): void {
    const payload = Buffer.from(text)
    const mask = randomBytes(4)
    const len = payload.length
    const header = len < 126 ? Buffer.from([0x81, 0x80 | len]) : len < 65536 ? Buffer.from([0x81, 0xfe, len >> 8, len & 0xff]) : Buffer.concat([Buffer.from([0x81, 0xff]), bigLen(len)])
    const masked = Buffer.alloc(len)
    for (let i = 0; i < len; i++) masked[i] = payload[i] ^ mask[i % 4]
    this.socket.write(Buffer.concat([header, mask, masked]))
  }

  /** Stops reading: the kernel buffers fill and the relay sees backpressure. */
  pause(): void {
    this.socket.pause()
  }

  resume(): void {
    this.socket.resume()
  }

  frames(): any[] {
    return this.texts.map((t) => JSON.parse(t))
  }

  destroy(): void {
    this.socket.destroy()
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk
    for (;;) {
      if (this.buf.length < 2) return
      const opcode = this.buf[0] & 0x0f
      let len = this.buf[1] & 0x7f
      let offset = 2
      if (len === 126) {
        if (this.buf.length < 4) return
        len = this.buf.readUInt16BE(2)
        offset = 4
      } else if (len === 127) {
        if (this.buf.length < 10) return
        len = Number(this.buf.readBigUInt64BE(2))
        offset = 10
      }
      if (this.buf.length < offset + len) return
      const payload = this.buf.subarray(offset, offset + len)
      this.buf = this.buf.subarray(offset + len)
      if (opcode === 1) this.texts.push(payload.toString())
      if (opcode === 8) this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005
      // opcode 9 (ping) is deliberately left unanswered
    }
  }
}

function bigLen(n: number): Buffer {
  const b = Buffer.alloc(8)
  b.writeBigUInt64BE(BigInt(n))
  return b
}
