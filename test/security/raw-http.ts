/**
 * A plain TCP HTTP/1.1 client for tests that a fetch client cannot express: a body that stops before its
 * declared end, a body still being written while the answer arrives, a chosen source address on
 * loopback, several requests on one connection, requests the runtime itself rejects.
 */
import { connect, type Socket } from 'node:net'

export interface RawAnswer {
  status: number
  headers: Record<string, string>
  body: string
  json: any
}

export class RawConnection {
  private buf: Buffer = Buffer.alloc(0)
  private waiters: (() => void)[] = []
  closed = false
  error: string | null = null

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d])
      this.wake()
    })
    socket.on('error', (e: NodeJS.ErrnoException) => {
      this.error = e.code ?? e.message
      this.wake()
    })
    socket.on('close', () => {
      this.closed = true
      this.wake()
    })
  }

  static open(port: number, localAddress = '127.0.0.1'): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, localAddress })
      s.once('connect', () => resolve(new RawConnection(s)))
      s.once('error', reject)
    })
  }

  /** Writes bytes; resolves once they are handed to the kernel (never throws: the peer may be gone). */
  write(data: string | Uint8Array): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve()
      this.socket.write(data, () => resolve())
    })
  }

  /** Writes `bytes` filler bytes in chunks, going on while answers arrive; stops early if the socket closes. */
  async writeFiller(bytes: number, chunk = 64 * 1024): Promise<number> {
    const block = Buffer.alloc(chunk, 0x20)
    let sent = 0
    while (sent < bytes && !this.socket.destroyed && !this.closed) {
      const n = Math.min(chunk, bytes - sent)
      await this.write(block.subarray(0, n))
      sent += n
    }
    return sent
  }

  /** The next complete answer (Content-Length framed); fails after `ms` or when the socket ends first. */
  async answer(ms = 5000): Promise<RawAnswer> {
    const deadline = Date.now() + ms
    for (;;) {
      const parsed = this.take()
      if (parsed) return parsed
      if (this.closed || this.error) throw new Error(`connection ended before an answer (${this.error ?? 'closed'}): ${JSON.stringify(this.buf.toString('latin1').slice(0, 200))}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`no answer within ${ms} ms: ${JSON.stringify(this.buf.toString('latin1').slice(0, 200))}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  /** Bytes received and not yet taken as an answer (an answer without Content-Length, e.g. the runtime's own). */
  rest(): string {
    return this.buf.toString('latin1')
  }

  async waitClosed(ms = 5000): Promise<void> {
    const deadline = Date.now() + ms
    while (!this.closed && Date.now() < deadline) await Bun.sleep(5)
    if (!this.closed) throw new Error('connection still open')
  }

  destroy(): void {
    this.socket.destroy()
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w()
  }

  private take(): RawAnswer | null {
    const text = this.buf.toString('latin1')
    const end = text.indexOf('\r\n\r\n')
    if (end < 0) return null
    const lines = text.slice(0, end).split('\r\n')
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':')
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
    }
    const length = Number(headers['content-length'] ?? 0)
    if (this.buf.length < end + 4 + length) return null
    const body = this.buf.subarray(end + 4, end + 4 + length).toString('utf8')
    this.buf = this.buf.subarray(end + 4 + length)
    let json: any
    try {
      json = JSON.parse(body)
    } catch {}
    return { status: Number(/^HTTP\/1\.[01] (\d+)/.exec(lines[0])?.[1] ?? 0), headers, body, json }
  }
}

/** The head of a request: request line, Host, the given headers, blank line. */
export function head(method: string, path: string, headers: Record<string, string | number> = {}): string {
  return [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n')
}
