import type { DiscoveryFilter, DiscoveryRecord, TagCount } from '../../services/models/records.ts'
import type { DiscoveryStore } from '../../services/ports.ts'
import { searchWords } from './agents-store.ts'
import { likePrefix, substringLike, TAG_RANGE_END } from '../like.ts'
import { rows, type Db } from './db.ts'

const COLUMNS = `a.public_key AS "publicKey", a.display_name AS "displayName", a.last_active_at::float8 AS "lastActiveAt", a.capabilities`
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'
const LOWER = 'abcdefghijklmnopqrstuvwxyz'

/**
 * Discovery reads with the answers of SQLite's: public active agents, newest activity first, then by
 * key (byte order). Tags are looked up in agent_tags (kept by triggers), words in agent_words (kept by
 * the agent store): each query word is split and folded as FTS5's unicode61 tokenizer would, its last
 * piece matched as a prefix and the others whole. The name filter is a substring, case-insensitive for
 * ASCII letters as SQLite's LIKE is.
 */
export class PgDiscoveryStore implements DiscoveryStore {
  constructor(private readonly db: Db) {}

  async search(filter: DiscoveryFilter): Promise<DiscoveryRecord[]> {
    const where = [`a.visibility = 'public'`, `a.status = 'active'`]
    const params: unknown[] = []
    const p = (value: unknown) => `$${params.push(value)}`
    for (const tag of new Set(filter.tags)) {
      where.push(`EXISTS (SELECT 1 FROM agent_tags t WHERE t.public_key = a.public_key AND t.tag = ${p(tag)} AND t.listed)`)
    }
    for (const word of new Set(filter.words)) {
      const pieces = searchWords(word)
      if (pieces.length === 0) return [] // a word no token can match empties the AND (as FTS5's empty phrase)
      pieces.forEach((piece, i) => {
        const last = i === pieces.length - 1
        where.push(
          last
            ? `EXISTS (SELECT 1 FROM agent_words w WHERE w.public_key = a.public_key AND w.word LIKE ${p(likePrefix(piece))})`
            : `EXISTS (SELECT 1 FROM agent_words w WHERE w.public_key = a.public_key AND w.word = ${p(piece)})`,
        )
      })
    }
    if (filter.activeSince !== null) where.push(`a.last_active_at >= ${p(filter.activeSince)}`)
    if (filter.after) {
      const at = p(filter.after.lastActiveAt)
      where.push(`a.last_active_at <= ${at}`, `(a.last_active_at < ${at} OR a.public_key > ${p(filter.after.publicKey)})`)
    }
    if (filter.nameContains !== null) {
      where.push(`translate(a.display_name, '${UPPER}', '${LOWER}') LIKE ${p(substringLike(asciiLower(filter.nameContains)))}`)
    }
    const limit = p(filter.limit)
    return rows<DiscoveryRecord>(
      this.db,
      `SELECT ${COLUMNS} FROM agents a WHERE ${where.join(' AND ')} ORDER BY a.last_active_at DESC, a.public_key LIMIT ${limit}`,
      params,
    )
  }

  async catalog(opts: { prefix: string; limit: number }): Promise<TagCount[]> {
    if (!opts.prefix) {
      return rows<TagCount>(this.db, 'SELECT tag, agent_count AS "agentCount" FROM tag_counts ORDER BY agent_count DESC, tag LIMIT $1', [opts.limit])
    }
    return rows<TagCount>(
      this.db,
      'SELECT tag, agent_count AS "agentCount" FROM tag_counts WHERE tag >= $1 AND tag < $2 ORDER BY agent_count DESC, tag LIMIT $3',
      [opts.prefix, opts.prefix + TAG_RANGE_END, opts.limit],
    )
  }
}

const asciiLower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase())

