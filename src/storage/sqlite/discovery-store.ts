import type { Database, Statement } from 'bun:sqlite'
import type { DiscoveryFilter, DiscoveryRecord, TagCount } from '../../services/models/records.ts'
import type { DiscoveryStore } from '../../services/ports.ts'
import { substringLike, TAG_RANGE_END } from '../like.ts'

export { substringLike }

const COLUMNS = 'a.public_key AS publicKey, a.display_name AS displayName, a.last_active_at AS lastActiveAt, a.capabilities AS capabilities'
const LISTED = `a.visibility = 'public' AND a.status = 'active'`
/**
 * At this many text matches or more, walking agents in recency order and keeping the matching ones finds a
 * page sooner than fetching and sorting every match (measured at 100k agents: the two cost the same
 * around a few hundred matches).
 */
export const BROAD_MATCH = 1000
/** How a text search without tags is driven: from its matches, or along the recency index. */
export type TextDriver = 'matches' | 'recency'

/**
 * Discovery reads (docs/protocol.md §3) over the indexes that migrations/0003 keeps: agent_tags in result order per
 * tag, agents_fts for words, agents_discover_idx for recency, tag_counts for the catalog. Each search
 * is driven by its most selective input so that it reads about one page of index entries, not every
 * agent: the rarest tag, else the text match, else recency. Statements are prepared once per shape.
 */
export class SqliteDiscoveryStore implements DiscoveryStore {
  private readonly statements = new Map<string, Statement>()
  private readonly tagCountStmt
  private readonly catalogStmt
  private readonly catalogPrefixStmt
  private readonly matchProbeStmt

  constructor(private readonly client: Database) {
    this.tagCountStmt = client.query<{ n: number }, [string]>('SELECT agent_count AS n FROM tag_counts WHERE tag = ?')
    this.catalogStmt = client.query<TagCount, [number]>(
      'SELECT tag, agent_count AS agentCount FROM tag_counts ORDER BY agent_count DESC, tag LIMIT ?',
    )
    this.matchProbeStmt = client.query<{ n: number }, [string]>(
      `SELECT count(*) AS n FROM (SELECT 1 FROM agents_fts WHERE agents_fts MATCH ? LIMIT ${BROAD_MATCH})`,
    )
    this.catalogPrefixStmt = client.query<TagCount, [string, string, number]>(
      'SELECT tag, agent_count AS agentCount FROM tag_counts WHERE tag >= ? AND tag < ? ORDER BY agent_count DESC, tag LIMIT ?',
    )
  }

  /** Public, active agents matching every condition, in docs/protocol.md §3 order, at most `filter.limit`. */
  async search(filter: DiscoveryFilter): Promise<DiscoveryRecord[]> {
    const q = compile(filter)
    const plan = this.build(q, this.textDriver(q))
    if (!plan) return []
    return this.prepare(plan.sql).all(...plan.args) as DiscoveryRecord[]
  }

  /** The EXPLAIN QUERY PLAN lines of the statement `search` would run (tests check index use). */
  explain(filter: DiscoveryFilter, textDriver?: TextDriver): string[] {
    const q = compile(filter)
    const plan = this.build(q, textDriver ?? this.textDriver(q))
    if (!plan) return []
    return (this.client.query(`EXPLAIN QUERY PLAN ${plan.sql}`).all(...(plan.args as never[])) as { detail: string }[]).map((r) => r.detail)
  }

  /** Public active agents that use `tag` (0 when none). */
  tagCount(tag: string): number {
    return this.tagCountStmt.get(tag)?.n ?? 0
  }

  /** Tags with their counts of public active agents, most used first, then by tag. */
  async catalog(opts: { prefix: string; limit: number }): Promise<TagCount[]> {
    if (!opts.prefix) return this.catalogStmt.all(opts.limit)
    return this.catalogPrefixStmt.all(opts.prefix, opts.prefix + TAG_RANGE_END, opts.limit)
  }

  /** The EXPLAIN QUERY PLAN lines of the catalog statement. */
  explainCatalog(prefix: string): string[] {
    const sql = prefix
      ? `SELECT tag, agent_count FROM tag_counts WHERE tag >= ? AND tag < ? ORDER BY agent_count DESC, tag LIMIT ?`
      : `SELECT tag, agent_count FROM tag_counts ORDER BY agent_count DESC, tag LIMIT ?`
    const args = prefix ? [prefix, prefix + TAG_RANGE_END, 10] : [10]
    return (this.client.query(`EXPLAIN QUERY PLAN ${sql}`).all(...(args as never[])) as { detail: string }[]).map((r) => r.detail)
  }

  /** A text search alone is driven by its matches when they are few, else along the recency index. */
  private textDriver(f: CompiledFilter): TextDriver {
    if (f.match === null || f.tags.length > 0) return 'matches'
    return (this.matchProbeStmt.get(f.match)?.n ?? 0) >= BROAD_MATCH ? 'recency' : 'matches'
  }

  private prepare(sql: string): Statement {
    let stmt = this.statements.get(sql)
    if (!stmt) this.statements.set(sql, (stmt = this.client.prepare(sql)))
    return stmt
  }

  /** The SQL and arguments of one search, or null when a tag nobody uses makes the answer empty. */
  private build(f: CompiledFilter, textDriver: TextDriver): { sql: string; args: (string | number)[] } | null {
    const where: string[] = []
    const args: (string | number)[] = []
    const byTag = f.tags.length > 0
    // the columns that carry the order, from the driving index
    const lae = byTag ? 'd.last_active_at' : 'a.last_active_at'
    const key = byTag ? 'd.public_key' : 'a.public_key'
    let from: string

    if (byTag) {
      // drive with the rarest tag: its index entries are already in result order
      const counted = f.tags.map((tag) => ({ tag, n: this.tagCount(tag) }))
      if (counted.some((c) => c.n === 0)) return null
      counted.sort((x, y) => x.n - y.n)
      from = 'agent_tags d CROSS JOIN agents a'
      where.push('d.tag = ?', 'd.listed = 1', 'a.public_key = d.public_key')
      args.push(counted[0].tag)
      for (const other of counted.slice(1)) {
        where.push('EXISTS (SELECT 1 FROM agent_tags x WHERE x.public_key = d.public_key AND x.tag = ?)')
        args.push(other.tag)
      }
      if (f.match !== null) {
        where.push('a.rowid IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH ?)')
        args.push(f.match)
      }
    } else if (f.match !== null && textDriver === 'matches') {
      // few matches: fetch them all, then order them
      from = 'agents_fts CROSS JOIN agents a'
      where.push('agents_fts MATCH ?', 'a.rowid = agents_fts.rowid')
      args.push(f.match)
    } else if (f.match !== null) {
      // many matches: walk agents in result order, keep those in the match set, stop after a page
      from = 'agents a INDEXED BY agents_discover_idx'
      where.push('a.rowid IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH ?)')
      args.push(f.match)
    } else {
      // name and active_since only: walk agents in result order (display_name is in the index)
      from = 'agents a'
    }
    const order = `${lae} DESC, ${key}`
    where.push(LISTED)
    if (f.activeSince !== null) {
      where.push(`${lae} >= ?`)
      args.push(f.activeSince)
    }
    if (f.after) {
      // the first comparison bounds the index range; the second settles ties on last_active_at
      where.push(`${lae} <= ?`, `(${lae} < ? OR ${key} > ?)`)
      args.push(f.after.lastActiveAt, f.after.lastActiveAt, f.after.publicKey)
    }
    if (f.nameLike !== null) {
      where.push(`a.display_name LIKE ? ESCAPE '\\'`)
      args.push(f.nameLike)
    }
    args.push(f.limit)
    return { sql: `SELECT ${COLUMNS} FROM ${from} WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT ?`, args }
  }
}

/** A filter with its text turned into this engine's syntax. */
interface CompiledFilter extends DiscoveryFilter {
  /** A complete FTS5 expression built from quoted words, or null for no text search. */
  match: string | null
  /** A LIKE pattern with `\\` as its escape character, or null. */
  nameLike: string | null
}

/**
 * FTS5 expression and LIKE pattern of a filter. Each word becomes a quoted string (inner `"` doubled)
 * matched as a prefix (`"word"*`), and the words are ANDed: quoting makes every character text, so
 * `OR`, `NEAR`, `*`, `^`, `:`, parentheses and unbalanced quotes are searched for, never obeyed. In
 * the name pattern `%`, `_` and `\\` are taken literally.
 */
function compile(f: DiscoveryFilter): CompiledFilter {
  return { ...f, match: ftsMatch(f.words), nameLike: f.nameContains === null ? null : substringLike(f.nameContains) }
}

/** The FTS5 expression of prefix words, ANDed, every character quoted as text; null for none. */
export function ftsMatch(words: readonly string[]): string | null {
  const terms = [...new Set(words.map((w) => `"${w.replaceAll('"', '""')}"*`))]
  return terms.length ? terms.join(' AND ') : null
}

