import { randomFillSync } from 'node:crypto'

/** Random bytes drawn from the CSPRNG in blocks: one system call per 4 KiB of ids, not one per id. */
const POOL = new Uint8Array(4096)
let used = POOL.length
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'))

/** Random hex from the CSPRNG. Bytes of the pool are handed out once and never reused. */
export function randomHex(chars: number): string {
  const bytes = Math.ceil(chars / 2)
  if (bytes > POOL.length) throw new RangeError('randomHex: too many characters')
  if (used + bytes > POOL.length) {
    randomFillSync(POOL)
    used = 0
  }
  let out = ''
  for (let i = 0; i < bytes; i++) out += HEX[POOL[used + i]]
  used += bytes
  return out.length === chars ? out : out.slice(0, chars)
}

/** `req_` + 16 hex: the request id of docs/protocol.md §11. */
export const newRequestId = (): string => `req_${randomHex(16)}`

/** `msg_<unix-seconds>_<12 lowercase hex>` (docs/protocol.md §4.1). */
export const newMessageId = (nowMs: number): string => `msg_${Math.floor(nowMs / 1000)}_${randomHex(12)}`

/** `blob_` + 24 random hex chars, never derived from the content (docs/protocol.md §6). */
export const newBlobId = (): string => `blob_${randomHex(24)}`

/** `dlv_` + 24 random hex chars: one per message per webhook, stable across attempts (docs/protocol.md §9). */
export const newDeliveryId = (): string => `dlv_${randomHex(24)}`

export const MESSAGE_ID_PATTERN = /^msg_\d{1,12}_[0-9a-f]{12}$/
export const BLOB_ID_PATTERN = /^blob_[0-9a-f]{24}$/
