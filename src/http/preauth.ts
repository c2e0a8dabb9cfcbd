/**
 * What a client may cost the relay before it has proved who it is: a request rate per client address
 * (a token bucket, checked before any signature), and memory for request bodies and WebSocket
 * handshakes that are not yet authenticated, bounded over all clients and per address. Over a bound
 * the relay answers at once (429 for one address, 503 for the whole relay, both with Retry-After)
 * instead of buffering. Per-agent limits apply after authentication, as before.
 */
import { RelayError } from '../errors.ts'
import type { Clock } from '../lib/clock.ts'

export interface PreAuthLimits {
  /** Bytes held for unauthenticated requests and sockets over all clients (0 = no limit). */
  memoryBytes: number
  /** The same per client address (0 = no limit). */
  memoryPerAddressBytes: number
  /** Requests per client address per minute, before signature checks (0 = no limit). */
  addressPerMin: number
}

/** Seconds a client is told to wait when the relay as a whole is over its budget. */
const BUSY_RETRY_AFTER_S = 1
/** Idle address buckets are dropped once this many are tracked (a full bucket carries no state). */
const PRUNE_AT = 50_000

/** The request carries the address its server saw (Bun.serve knows it; in-process callers have none). */
const CLIENT_ADDRESS = Symbol('client-address')
type Addressed = Request & { [CLIENT_ADDRESS]?: string | null }

/** Stamps the client address on a request, for the pipeline's first step and the socket hub. */
export const setClientAddress = (request: Request, address: string | null): void => {
  ;(request as Addressed)[CLIENT_ADDRESS] = address
}
/** The client address of a request, or null when it came from an in-process caller. */
export const clientAddressOf = (request: Request): string | null => (request as Addressed)[CLIENT_ADDRESS] ?? null

// which client a request counts against (proxies, exemptions, IPv6 prefixes): lib/address-key.ts
export { addressKey, clientAddress, parseAddressList } from '../lib/address-key.ts'

/**
 * What is held: request bodies and WebSocket handshakes each have their own share per address, so a
 * host whose many agents reconnect their sockets at once does not starve its own requests (and the
 * reverse). Over all clients they share one budget, of which sockets may hold at most half: a
 * reconnect storm after a restart (each handshake holds room for one unfinished frame) leaves the
 * other half to requests.
 */
export type HoldKind = 'body' | 'socket'

/**
 * Who is asking: a request whose signature headers name a key that already has an agent record may use
 * the reserve (the signature is not checked yet, so the reserve is shared by all such requests and
 * bounded per address like the rest); everyone else, strangers, may not.
 */
export type Claimant = 'known' | 'stranger'

/**
 * The part of the memory budget only requests naming a known key may use: a flood of strangers fills
 * the rest and is refused, while the agents already registered keep a quarter of the budget.
 */
const KNOWN_RESERVE_FRACTION = 0.25
/** An address may always hold this much, however many addresses share the budget (one small body). */
const FAIR_SHARE_FLOOR_BYTES = 64 * 1024

/**
 * How many uploads whose signature is not checked yet may stream at once, besides the memory budget:
 * the runtime keeps several MiB of every body it is reading (its buffers, and chunks read but not yet
 * collected), more than the budget counts per upload when they arrive at full speed. Strangers may start
 * one while fewer than `strangers` run in all, at most `strangersPerAddress` per address; uploads naming
 * a known key (an agent sending several attachments at once) up to `all`, at most `knownPerAddress` per
 * address, the memory budget permitting; so may uploads not counted per address (exempt addresses, the
 * operator's own machines, and in-process callers). Beyond a cap an upload is refused before its body
 * (429 for its address, 503 for the relay), like any pre-auth bound.
 */
export const UNVERIFIED_UPLOAD_SLOTS = { strangers: 4, strangersPerAddress: 2, all: 16, knownPerAddress: 8 } as const

/** Bytes held for one unauthenticated request or socket; grows as it buffers, released once. */
export class PreAuthHold {
  private bytes = 0
  private released = false
  private upload = false
  private readonly key: string | null

  constructor(
    private readonly budget: PreAuthBudget,
    readonly address: string | null,
    readonly kind: HoldKind,
    readonly claimant: Claimant,
  ) {
    this.key = address === null ? null : `${kind} ${address}`
  }

  /** Holds `n` more bytes, or throws 429 (this address) / 503 (the relay) and holds nothing more. */
  take(n: number): void {
    if (this.released) throw new Error('pre-auth hold used after release')
    this.budget.take(this.key, this.kind, n, this.claimant)
    this.bytes += n
  }

  /**
   * Holds one of the slots for unverified uploads (UNVERIFIED_UPLOAD_SLOTS) and `n` bytes, or throws
   * 429 / 503 and holds nothing more; the slot is given back with the bytes, on release.
   */
  takeUpload(n: number): void {
    if (this.released) throw new Error('pre-auth hold used after release')
    if (this.upload) throw new Error('pre-auth hold already holds an upload slot')
    this.budget.takeUploadSlot(this.address, this.claimant)
    try {
      this.take(n)
    } catch (err) {
      this.budget.giveUploadSlot(this.address)
      throw err
    }
    this.upload = true
  }

  /** Bytes held now. */
  get heldBytes(): number {
    return this.bytes
  }

  release(): void {
    if (this.released) return
    this.released = true
    this.budget.give(this.key, this.kind, this.bytes)
    this.bytes = 0
    if (this.upload) this.budget.giveUploadSlot(this.address)
  }
}

export class PreAuthBudget {
  private total = 0
  private sockets = 0
  private readonly perAddress = new Map<string, number>()
  /** Addresses holding some bytes for request bodies (the fair share divides among them). */
  private bodyHolders = 0
  private readonly buckets = new Map<string, { tokens: number; at: number }>()
  /** Unverified uploads streaming now, over all and per address (see UNVERIFIED_UPLOAD_SLOTS). */
  private uploadsRunning = 0
  private readonly uploadsBy = new Map<string, number>()

  constructor(
    private readonly limits: PreAuthLimits,
    private readonly clock: Clock,
  ) {}

  /** A hold for one request or socket from `address` (null: an in-process caller, counted globally only). */
  open(address: string | null, kind: HoldKind = 'body', claimant: Claimant = 'stranger'): PreAuthHold {
    return new PreAuthHold(this, address, kind, claimant)
  }

  /** Bytes held right now (health, tests). */
  get heldBytes(): number {
    return this.total
  }

  /** Unverified uploads streaming right now (health, tests). */
  get unverifiedUploads(): number {
    return this.uploadsRunning
  }

  heldBy(address: string, kind: HoldKind = 'body'): number {
    return this.perAddress.get(`${kind} ${address}`) ?? 0
  }

  /**
   * Counts one request from `address` in its token bucket (capacity: one minute's worth, refilled
   * continuously); throws 429 with Retry-After when it is empty. In-process callers are not counted.
   */
  admit(address: string | null): void {
    const perMin = this.limits.addressPerMin
    if (perMin <= 0 || address === null) return
    const now = this.clock.now()
    const ratePerMs = perMin / 60_000
    let bucket = this.buckets.get(address)
    if (!bucket) {
      if (this.buckets.size >= PRUNE_AT) this.prune(now, ratePerMs)
      bucket = { tokens: perMin, at: now }
      this.buckets.set(address, bucket)
    } else {
      bucket.tokens = Math.min(perMin, bucket.tokens + (now - bucket.at) * ratePerMs)
      bucket.at = now
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return
    }
    const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerMs / 1000))
    throw new RelayError(
      'rate_limit_exceeded',
      `Too many requests from your address: at most ${perMin} per minute`,
      { limit: perMin, window: '1m', retry_after: retryAfter },
      { 'Retry-After': String(retryAfter) },
    )
  }

  /**
   * @internal PreAuthHold.take; `key` is the hold's kind and address. Refused (nothing taken) when the
   * address would pass its cap or its fair share — the budget strangers may use, divided by the
   * addresses holding some of it, never under FAIR_SHARE_FLOOR_BYTES — or when the relay would pass
   * its budget (strangers: all but the known keys' reserve).
   */
  take(key: string | null, kind: HoldKind, n: number, claimant: Claimant = 'stranger'): void {
    const { memoryBytes, memoryPerAddressBytes } = this.limits
    const mine = key === null ? 0 : (this.perAddress.get(key) ?? 0)
    // the reserve is for request bodies; handshakes have their own half of the budget
    const open = memoryBytes <= 0 ? Infinity : kind === 'body' && claimant === 'stranger' ? memoryBytes * (1 - KNOWN_RESERVE_FRACTION) : memoryBytes
    const fairShare = kind === 'body' ? Math.max(FAIR_SHARE_FLOOR_BYTES, open / (this.bodyHolders + (mine === 0 ? 1 : 0))) : Infinity
    const perAddress = Math.min(memoryPerAddressBytes > 0 ? memoryPerAddressBytes : Infinity, fairShare)
    if (key !== null && mine + n > perAddress) {
      throw new RelayError(
        'rate_limit_exceeded',
        'Too many unauthenticated requests in progress from your address; retry shortly',
        { limit_bytes: Math.floor(perAddress), retry_after: BUSY_RETRY_AFTER_S },
        { 'Retry-After': String(BUSY_RETRY_AFTER_S) },
      )
    }
    if (memoryBytes > 0 && (this.total + n > open || (kind === 'socket' && this.sockets + n > memoryBytes / 2))) {
      throw new RelayError('service_unavailable', 'The relay is busy; retry shortly', { retry_after: BUSY_RETRY_AFTER_S }, { 'Retry-After': String(BUSY_RETRY_AFTER_S) })
    }
    this.total += n
    if (kind === 'socket') this.sockets += n
    if (key === null || n === 0) return
    if (mine === 0 && kind === 'body') this.bodyHolders++
    this.perAddress.set(key, mine + n)
  }

  /**
   * @internal PreAuthHold.takeUpload: one more unverified upload from `address` (null: not counted per
   * address), or 429 / 503 when a cap of UNVERIFIED_UPLOAD_SLOTS is reached.
   */
  takeUploadSlot(address: string | null, claimant: Claimant): void {
    const slots = UNVERIFIED_UPLOAD_SLOTS
    const mine = address === null ? 0 : (this.uploadsBy.get(address) ?? 0)
    const stranger = claimant === 'stranger' && address !== null
    const perAddress = stranger ? slots.strangersPerAddress : slots.knownPerAddress
    if (address !== null && mine >= perAddress) {
      throw new RelayError(
        'rate_limit_exceeded',
        `Too many unverified uploads in progress from your address: at most ${perAddress} at once; retry shortly`,
        { limit: perAddress, retry_after: BUSY_RETRY_AFTER_S },
        { 'Retry-After': String(BUSY_RETRY_AFTER_S) },
      )
    }
    if (this.uploadsRunning >= (stranger ? slots.strangers : slots.all)) {
      throw new RelayError('service_unavailable', 'The relay is busy with other uploads; retry shortly', { retry_after: BUSY_RETRY_AFTER_S }, { 'Retry-After': String(BUSY_RETRY_AFTER_S) })
    }
    this.uploadsRunning++
    if (address !== null) this.uploadsBy.set(address, mine + 1)
  }

  /** @internal PreAuthHold.release, for a hold that took an upload slot. */
  giveUploadSlot(address: string | null): void {
    this.uploadsRunning--
    if (address === null) return
    const left = (this.uploadsBy.get(address) ?? 0) - 1
    if (left > 0) this.uploadsBy.set(address, left)
    else this.uploadsBy.delete(address)
  }

  /** @internal PreAuthHold.release */
  give(key: string | null, kind: HoldKind, n: number): void {
    this.total -= n
    if (kind === 'socket') this.sockets -= n
    if (key === null) return
    const left = (this.perAddress.get(key) ?? 0) - n
    if (left > 0) this.perAddress.set(key, left)
    else if (this.perAddress.delete(key) && kind === 'body') this.bodyHolders--
  }

  private prune(now: number, ratePerMs: number): void {
    const perMin = this.limits.addressPerMin
    for (const [address, b] of this.buckets) {
      if (b.tokens + (now - b.at) * ratePerMs >= perMin) this.buckets.delete(address)
    }
  }
}
