/**
 * A unit of work waiting in a group commit (sqlite/unit-of-work.ts, postgres/group-commit.ts): the
 * function a caller handed in, how to answer it, and what it gave once the group ran.
 */
export interface UnitJob<S> {
  fn: (tx: S) => Promise<unknown>
  resolve: (value: any) => void
  reject: (err: unknown) => void
  ok?: boolean
  value?: unknown
  error?: unknown
}

/** Answers every unit of a committed group: its value, or the error it failed with alone. */
export function settleJobs<S>(batch: UnitJob<S>[]): void {
  for (const job of batch) {
    if (job.ok) job.resolve(job.value)
    else job.reject(job.error)
  }
}
