/**
 * Request authentication, docs/protocol.md §1.2, in its exact order: header shape (401 unauthorized), timestamp
 * window (401 timestamp_expired), signature (401 invalid_signature), replay (409 replay_detected), then
 * the agent (auto-created; 403 agent_suspended). Shared by HTTP requests and WebSocket auth frames.
 */
import { canonicalStrings, wsCanonicalString } from '../auth/canonical.ts'
import { decodePublicKey, decodeSignature } from '../auth/keys.ts'
import type { VerifyPool } from '../auth/verify-pool.ts'
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'
import type { AgentRecord } from './models/records.ts'
import type { AgentStore, ReplayStore } from './ports.ts'

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/

/** Parses an RFC 3339 timestamp strictly; null when malformed or out of range. */
export function parseRfc3339(text: string): number | null {
  const m = RFC3339.exec(text)
  if (!m) return null
  const mo = Number(m[2])
  const d = Number(m[3])
  const h = Number(m[4])
  const mi = Number(m[5])
  const s = Number(m[6])
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return null
  const ms = Date.parse(text.toUpperCase())
  return Number.isFinite(ms) ? ms : null
}

/** Writes of last_active_at are coalesced to one per agent per this many ms (docs/protocol.md §1.2). */
const TOUCH_INTERVAL_MS = 10_000

export interface SignedInput {
  publicKey: string | null
  timestamp: string | null
  signature: string | null
  /** The client address (for the per-address new-agent rate); null or absent when exempt. */
  address?: string | null
}

export interface PrecheckedAuth {
  address?: string | null
  publicKey: string
  keyBytes: Uint8Array
  signature: string
  sigBytes: Uint8Array
  timestamp: string
}

/**
 * Largest clock difference between relay instances (cluster mode) the replay guard absorbs: each
 * instance judges timestamps by its own clock, and any of them prunes the shared entries.
 */
export const CLOCK_SKEW_MARGIN_MS = 60_000

/**
 * When a replay entry recorded `now` may go: a replay is only possible while the timestamp is inside
 * the window (twice the tolerance from now at most), on an instance whose clock may be up to the margin
 * behind the one that prunes.
 */
export function replayEntryExpiry(now: number, toleranceMs: number): number {
  return now + 2 * toleranceMs + CLOCK_SKEW_MARGIN_MS
}

/** 22 base64url characters = the first 128 bits of a signature: enough to identify it in the replay guard. */
const SIGNATURE_ID_CHARS = 22

/**
 * Who may use the relay at all (operator admission): called for every authenticated key before its
 * agent is used, with whether a record exists; throws 403 `forbidden` to refuse (nothing is created).
 */
export interface AdmissionGate {
  check(publicKey: string, known: boolean, address?: string | null): Promise<void> | void
  /** The most agent records the relay holds when `publicKey` is created (0 = no cap). */
  capFor?(publicKey: string): number
  /** The refusal when the cap stopped `publicKey` from being created. */
  capReached?(max: number): Error
}

export interface AuthenticatorDeps {
  agents: AgentStore
  replay: ReplayStore
  verifier: VerifyPool
  clock: Clock
  toleranceMs: number
  admission?: AdmissionGate
  /** A write nobody waits for failed (last-active updates). */
  onBackgroundError?: (err: unknown) => void
}

export class Authenticator {
  private readonly lastTouch = new Map<string, number>()
  private readonly agents: AgentStore
  private readonly replay: ReplayStore
  private readonly verifier: VerifyPool
  private readonly clock: Clock
  private readonly toleranceMs: number
  private readonly admission: AdmissionGate | undefined
  private readonly onBackgroundError: (err: unknown) => void

  constructor(deps: AuthenticatorDeps) {
    this.agents = deps.agents
    this.replay = deps.replay
    this.verifier = deps.verifier
    this.clock = deps.clock
    this.toleranceMs = deps.toleranceMs
    this.admission = deps.admission
    this.onBackgroundError = deps.onBackgroundError ?? (() => {})
  }

  /**
   * Steps 1–5 for an HTTP request (`bodyHash` over the raw body bytes), without waiting for the replay
   * entry to be written: the caller proceeds at once and must await `committed` before it answers.
   * Writes the handler queues on the same group commit land in the same transaction (or a later one),
   * so a request never pays two commits.
   */
  authenticateRequestDeferred(
    pre: PrecheckedAuth,
    method: string,
    pathWithQuery: string,
    bodyHash: string,
  ): Promise<{ agent: AgentRecord; committed: Promise<void> }> {
    // the target as received, and as sent when the runtime re-encoded characters sent raw (auth/canonical.ts)
    return this.verifyAndReserve(pre, canonicalStrings(method, pathWithQuery, pre.timestamp, bodyHash))
  }

  /** Steps 1–5 for a WebSocket auth frame (canonical string `WS\n` + timestamp). */
  authenticateWs(input: SignedInput): Promise<AgentRecord> {
    const pre = this.checkHeaders(input)
    return this.finish(pre, wsCanonicalString(pre.timestamp))
  }

  /**
   * Steps 1–2 only: header shape and timestamp window. Streamed uploads call this before reading a
   * byte, then `finish` once the body hash is known.
   */
  checkHeaders(input: SignedInput): PrecheckedAuth {
    const { publicKey, timestamp, signature } = input
    if (!publicKey || !timestamp || !signature) {
      throw new RelayError('unauthorized', 'Missing authentication: X-M2M-Public-Key, X-M2M-Timestamp and X-M2M-Signature are required')
    }
    const keyBytes = decodePublicKey(publicKey)
    if (!keyBytes) throw new RelayError('unauthorized', 'Malformed public key: expected 43 base64url characters (32 bytes)')
    const sigBytes = decodeSignature(signature)
    if (!sigBytes) throw new RelayError('unauthorized', 'Malformed signature: expected unpadded base64url of 64 bytes')
    const at = parseRfc3339(timestamp)
    if (at === null) throw new RelayError('unauthorized', 'Malformed timestamp: expected RFC 3339')
    if (Math.abs(this.clock.now() - at) > this.toleranceMs) {
      throw new RelayError('timestamp_expired', `Timestamp is outside the allowed window of ±${Math.round(this.toleranceMs / 1000)} s`)
    }
    return { publicKey, keyBytes, signature, sigBytes, timestamp, address: input.address }
  }

  /**
   * Steps 3–5: signature over the canonical text, then the replay cache (resolves once the
   * signature is durably recorded), then the agent. Nothing happens for a replay.
   */
  async finish(pre: PrecheckedAuth, canonicalText: string | readonly string[]): Promise<AgentRecord> {
    const { agent, committed } = await this.verifyAndReserve(pre, canonicalText)
    await committed
    return agent
  }

  private async verifyAndReserve(pre: PrecheckedAuth, canonicalText: string | readonly string[]): Promise<{ agent: AgentRecord; committed: Promise<void> }> {
    if (!(await this.verifiesAny(pre, typeof canonicalText === 'string' ? [canonicalText] : canonicalText))) {
      throw new RelayError('invalid_signature', 'Signature does not verify')
    }
    // admission first: a key the relay does not admit costs nothing stored, not even a replay entry
    // (repeating its request only gets the same refusal)
    const known = await this.agents.find(pre.publicKey)
    const admitting = this.admission?.check(pre.publicKey, known !== null, pre.address)
    if (admitting) await admitting
    const reservation = await this.replay.reserve(pre.signature.slice(0, SIGNATURE_ID_CHARS), replayEntryExpiry(this.clock.now(), this.toleranceMs))
    if (!reservation) throw new RelayError('replay_detected', 'This signature was already used')
    const committed = reservation.durable
    try {
      return { agent: await this.resolveAgent(pre.publicKey, known), committed }
    } catch (err) {
      committed.catch(() => {}) // the request fails anyway; the entry still guards against replays
      throw err
    }
  }

  /** Whether the signature verifies over one of the candidate texts (at most two; see canonicalStrings). */
  private async verifiesAny(pre: PrecheckedAuth, texts: readonly string[]): Promise<boolean> {
    for (const text of texts) if (await this.verifier.verify(pre.keyBytes, text, pre.sigBytes)) return true
    return false
  }

  /** Step 5: the agent record, created with defaults on first sight; suspended agents are refused. */
  private async resolveAgent(publicKey: string, known: AgentRecord | null): Promise<AgentRecord> {
    const now = this.clock.now()
    const agent = known ?? (await this.createAgent(publicKey, now))
    if (agent.status === 'suspended') throw new RelayError('agent_suspended', 'This agent is suspended')
    const last = this.lastTouch.get(publicKey) ?? agent.lastActiveAt
    if (now - last >= TOUCH_INTERVAL_MS) {
      // nobody waits for it: a lost update only makes last_active_at a little older; the record in hand
      // (a cached one, on SQLite) shows it at once
      agent.lastActiveAt = Math.max(agent.lastActiveAt, now)
      this.agents.touch(publicKey, now).catch(this.onBackgroundError)
      this.lastTouch.set(publicKey, now)
    } else if (!this.lastTouch.has(publicKey)) {
      this.lastTouch.set(publicKey, last)
    }
    return agent
  }

  /** A new agent record; under a cap on agent records the count and the insert are one atomic step. */
  private async createAgent(publicKey: string, now: number): Promise<AgentRecord> {
    const max = this.admission?.capFor?.(publicKey) ?? 0
    if (max <= 0) return this.agents.create(publicKey, now)
    const agent = await this.agents.createCapped(publicKey, now, max)
    if (agent) return agent
    throw this.admission?.capReached?.(max) ?? new RelayError('forbidden', `This relay holds its maximum of ${max} agents`)
  }

  /** Forgets coalescing state of a deleted agent. */
  forget(publicKey: string): void {
    this.lastTouch.delete(publicKey)
  }
}
