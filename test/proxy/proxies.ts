/**
 * The shipped proxy configurations (deploy/nginx.conf, deploy/Caddyfile) started on loopback for tests:
 * only what a loopback test cannot use (TLS, host name, upstream address) is swapped, each swap checked
 * to apply exactly once.
 */
import { spawn, type Subprocess } from 'bun'
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { ROOT } from '../support/binary.ts'

/** Replaces `from` (string or pattern) in `text`, insisting that it occurs exactly once. */
function swapOnce(text: string, from: string | RegExp, to: string): string {
  const count = typeof from === 'string' ? text.split(from).length - 1 : (text.match(new RegExp(from.source, from.flags + 'g')) ?? []).length
  if (count !== 1) throw new Error(`expected exactly one ${from} in the shipped configuration, found ${count}`)
  return text.replace(from, to)
}

export interface ProxyKind {
  name: string
  program: string | null
  /**
   * Starts the shipped configuration on 127.0.0.1:listen in front of 127.0.0.1:upstream — or of several
   * relays (a cluster), balanced as the README's cluster example does.
   */
  start(dir: string, listen: number, upstream: number | number[]): Promise<Subprocess>
}

export const PROXIES: ProxyKind[] = [
  {
    name: 'nginx',
    program: Bun.which('nginx') ?? Bun.which('nginx', { PATH: '/usr/sbin:/sbin' }),
    async start(dir, listen, upstream) {
      let site = readFileSync(join(ROOT, 'deploy/nginx.conf'), 'utf8')
      const servers = typeof upstream === 'number' ? `server 127.0.0.1:${upstream};` : upstream.map((p) => `server 127.0.0.1:${p} max_fails=2 fail_timeout=5s;`).join('\n    ')
      site = swapOnce(site, 'server 127.0.0.1:8080;', servers)
      site = swapOnce(site, /server \{\n {4}listen 80;[\s\S]*?\n\}\n/, '') // the http → https redirect
      site = swapOnce(site, 'listen 443 ssl http2;', `listen 127.0.0.1:${listen};`)
      site = swapOnce(site, /\n {4}listen \[::\]:443 ssl http2;/, '')
      site = swapOnce(site, /\n {4}ssl_certificate .*;\n {4}ssl_certificate_key .*;/, '')
      for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
        mkdirSync(join(dir, d), { recursive: true })
        chmodSync(join(dir, d), 0o777) // workers run as an unprivileged user
      }
      chmodSync(dir, 0o755)
      writeFileSync(join(dir, 'relay.conf'), site)
      writeFileSync(
        join(dir, 'nginx.conf'),
        `worker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\nevents { worker_connections 256; }\n` +
          `http {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  fastcgi_temp_path ${dir}/fastcgi;\n` +
          `  uwsgi_temp_path ${dir}/uwsgi;\n  scgi_temp_path ${dir}/scgi;\n  include ${dir}/relay.conf;\n}\n`,
      )
      return spawn([this.program as string, '-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'], { stdout: 'ignore', stderr: 'pipe' })
    },
  },
  {
    name: 'caddy',
    program: Bun.which('caddy'),
    async start(dir, listen, upstream) {
      let file = readFileSync(join(ROOT, 'deploy/Caddyfile'), 'utf8')
      const to = (typeof upstream === 'number' ? [upstream] : upstream).map((p) => `127.0.0.1:${p}`).join(' ')
      file = swapOnce(file, 'reverse_proxy 127.0.0.1:8080', `reverse_proxy ${to}`)
      file = swapOnce(file, /^relay\.example\.org \{/m, `http://127.0.0.1:${listen} {`)
      // global options for a test instance: no admin endpoint, no certificates
      file = `{\n\tadmin off\n\tauto_https off\n}\n\n${file}`
      writeFileSync(join(dir, 'Caddyfile'), file)
      const env = { PATH: process.env.PATH ?? '', HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir }
      return spawn([this.program as string, 'run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], { env, stdout: 'ignore', stderr: 'pipe' })
    },
  },
]

export async function waitForPort(port: number, proc: Subprocess): Promise<void> {
  const deadline = Date.now() + 20_000
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`proxy exited with ${proc.exitCode}: ${await new Response(proc.stderr as ReadableStream).text()}`)
    const up = await new Promise<boolean>((r) => {
      const s = connect(port, '127.0.0.1', () => (s.end(), r(true)))
      s.on('error', () => r(false))
    })
    if (up) return
    if (Date.now() > deadline) throw new Error(`proxy not listening on ${port}`)
    await Bun.sleep(50)
  }
}

