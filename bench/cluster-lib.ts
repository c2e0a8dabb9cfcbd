/** What the cluster benches share: a temporary PostgreSQL server and s3rver bucket, and pre-signed sends. */
import { ensureBinary, type makeAgents } from './lib.ts'
import { findPostgres, startPostgres } from '../test/support/postgres.ts'
import { startS3Server } from '../test/support/s3.ts'

export type Agent = ReturnType<typeof makeAgents>[number]

/** Builds the binary if needed, then starts PostgreSQL and s3rver (their binaries must be installed). */
export async function startClusterServices() {
  ensureBinary()
  const node = Bun.which('node')
  if (!node) throw new Error('node is needed to run s3rver')
  const pgBin = findPostgres()
  if (!pgBin) throw new Error("PostgreSQL's binaries are needed (Debian: apt-get install postgresql)")
  const pg = await startPostgres(pgBin)
  const s3 = await startS3Server(node)
  return { pg, s3 }
}

/** `total` signed sends, senders and recipients taken in turn, all signed with one timestamp. */
export function signedSends(senders: Agent[], recipients: Agent[], total: number) {
  const timestamp = new Date().toISOString()
  return Array.from({ length: total }, (_, i) => {
    const body = JSON.stringify({ recipient_key: recipients[i % recipients.length].keys.publicKey, body: { seq: i } })
    const s = senders[i % senders.length]
    return { body, headers: { ...s.sign('POST', '/v1/messages', timestamp, body), 'content-type': 'application/json' } }
  })
}
