import { UsageError, type CommandContext, type FlagSpec } from './command.ts'

/** --limit, --cursor and --all, the same on every paged list. */
export function pageFlags(maxLimit: number): FlagSpec[] {
  return [
    { name: 'limit', value: 'N', help: `page size, 1–${maxLimit} (the relay's default when absent)` },
    { name: 'cursor', value: 'CURSOR', help: 'continue from a next_cursor printed before' },
    { name: 'all', help: 'follow every page to the end' },
  ]
}

export function pageQuery(ctx: CommandContext, maxLimit: number): { all: boolean; limit?: number; cursor?: string } {
  const raw = ctx.flags.limit
  let limit: number | undefined
  if (raw !== undefined) {
    limit = Number(raw)
    if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) throw new UsageError(`--limit must be an integer 1–${maxLimit}`)
  }
  return { all: ctx.flags.all === 'true', limit, cursor: ctx.flags.cursor }
}
