import { loadConfig } from '../config/load.ts'
import { UsageError } from './args.ts'
import { errorLine } from './format.ts'
import { localUrl } from './serve.ts'

export const HEALTH_FLAGS = ['url', 'config', 'timeout']
export const HEALTH_BOOLEANS = ['json']

/**
 * `relay health [--url URL]`: exit 0 when the relay answers /v1/health/ready with 200, else 1, for
 * container HEALTHCHECKs and systemd. Without --url it asks the relay this machine's configuration
 * describes (RELAY_PORT, relay.config.ts, …), on loopback when it listens on every address.
 */
export async function health(flags: Record<string, string>): Promise<number> {
  const timeoutS = flags.timeout === undefined ? 5 : Number(flags.timeout)
  if (!Number.isFinite(timeoutS) || timeoutS <= 0 || timeoutS > 300) throw new UsageError('--timeout must be 0–300 seconds')
  let base = flags.url
  if (base === undefined) {
    const config = await loadConfig({ flags: flags.config ? { config: flags.config } : {} })
    base = localUrl(config.host, config.port)
  }
  if (!/^https?:\/\/[^\s/]+/.test(base)) throw new UsageError(`--url must be an http:// or https:// URL, got "${base}"`)
  const url = `${base.replace(/\/+$/, '')}/v1/health/ready`
  let status: number
  let body: unknown
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutS * 1000) })
    status = res.status
    body = await res.json().catch(() => null)
  } catch (err) {
    const reason = (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutS} s` : (err as Error).message
    if (flags.json === 'true') process.stdout.write(JSON.stringify({ url, ok: false, error: reason }) + '\n')
    else process.stderr.write(errorLine(`${url}: ${reason}`))
    return 1
  }
  const ok = status === 200
  if (flags.json === 'true') process.stdout.write(JSON.stringify({ url, ok, status, body }) + '\n')
  else if (ok) process.stdout.write(`ok ${url}\n`)
  else process.stderr.write(errorLine(`${url} answered ${status}: ${JSON.stringify(body)}`))
  return ok ? 0 : 1
}
