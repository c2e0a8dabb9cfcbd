/**
 * HTTP/1.1 over a plain socket, so a test controls the request line byte for byte (fetch and URL
 * re-encode characters such as ' in a query), and a recorder that answers every request after
 * noting the request line it received.
 */
import { connect, createServer, type Server } from 'node:net'

export interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
}

function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = []
  let i = 0
  for (;;) {
    const eol = body.indexOf('\r\n', i)
    if (eol < 0) break
    const size = parseInt(body.subarray(i, eol).toString(), 16)
    if (!size) break
    parts.push(body.subarray(eol + 2, eol + 2 + size))
    i = eol + 2 + size + 2
  }
  return Buffer.concat(parts)
}

/** Sends one request with `target` written as given on the request line; reads the whole answer. */
export function rawRequest(port: number, method: string, target: string, headers: object = {}, body = '', localAddress?: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress })
    const chunks: Buffer[] = []
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', reject)
    socket.on('end', () => {
      const all = Buffer.concat(chunks)
      const split = all.indexOf('\r\n\r\n')
      if (split < 0) return reject(new Error(`no HTTP answer: ${all.toString().slice(0, 200)}`))
      const [statusLine, ...lines] = all.subarray(0, split).toString('latin1').split('\r\n')
      const h: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(':')
        h[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      const rest = all.subarray(split + 4)
      resolve({ status: Number(statusLine.split(' ')[1]), headers: h, body: (h['transfer-encoding'] === 'chunked' ? dechunk(rest) : rest).toString() })
    })
    const bytes = Buffer.from(body)
    const head = [`${method} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: close', ...Object.entries(headers as Record<string, string>).map(([k, v]) => `${k}: ${v}`)]
    if (bytes.length) head.push(`Content-Length: ${bytes.length}`, 'Content-Type: application/json')
    // the target may hold raw non-ASCII bytes: write the head as bytes, not as re-encoded text
    socket.write(Buffer.concat([Buffer.from(head.join('\r\n') + '\r\n\r\n', 'latin1'), bytes]))
  })
}

/** A server that answers 200 to anything and remembers each request line, as received. */
export async function startRecorder(): Promise<{ port: number; lines: string[]; close(): Promise<void> }> {
  const lines: string[] = []
  const server: Server = createServer((socket) => {
    let buf = Buffer.alloc(0)
    socket.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      let end: number
      while ((end = buf.indexOf('\r\n\r\n')) >= 0) {
        lines.push(buf.subarray(0, buf.indexOf('\r\n')).toString('latin1'))
        buf = buf.subarray(end + 4)
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok')
      }
    })
    socket.on('error', () => {})
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as { port: number }).port,
    lines,
    close: () => new Promise((r) => server.close(() => r())),
  }
}
