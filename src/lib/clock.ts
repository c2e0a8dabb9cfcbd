/** The only place that reads the wall clock. Everything else receives a Clock. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number
}

export const systemClock: Clock = { now: () => Date.now() }

/** A clock that only moves when told to; used by tests. */
export class FakeClock implements Clock {
  constructor(private ms: number = Date.parse('2026-11-22T10:00:00.000Z')) {}
  now(): number {
    return this.ms
  }
  set(ms: number): void {
    this.ms = ms
  }
  advance(ms: number): void {
    this.ms += ms
  }
}

/** RFC 3339 UTC with milliseconds and a Z suffix, the only timestamp form the relay emits. */
export function iso(ms: number): string {
  return new Date(ms).toISOString()
}
