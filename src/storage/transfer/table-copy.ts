/**
 * Copies the rows of a relay's SQLite database into a PostgreSQL database that carries the same
 * schema (the same table and column names; the target's own migrations created it), then checks that
 * every source row arrived.
 *
 * Table by table in foreign-key order, in batches of `INSERT … ON CONFLICT DO NOTHING`: a row already
 * there is left as it is, so a second run copies nothing new and a run that stopped half way is
 * finished by the next. Values are converted by the type of the target column (SQLite's 0/1 into a
 * boolean, integers into bigint, text into json), read from information_schema rather than assumed.
 * Tables the target derives from others by triggers (the tag index, the capability catalog) are
 * left to it; so are SQLite's own full-text index and schema history.
 */
import type { Database } from 'bun:sqlite'
import type { SQL } from 'bun'
import { escapeText } from '../postgres/db.ts'
import { MIGRATE_MARK_KEY } from '../postgres/migrate-mark.ts'

/**
 * The tables of a relay, in the order they are copied unless the target's foreign keys ask for
 * another. A source table that is neither here nor in SKIPPED stops the copy before anything is
 * written: its rows would otherwise be left behind without a word.
 */
export const COPIED_TABLES = [
  'agents',
  'agent_tags',
  'tag_counts',
  'blobs',
  'blob_contents',
  'messages',
  'message_blobs',
  'acl_entries',
  'webhooks',
  'webhook_deliveries',
  'replay_log',
  'relay_state',
  'admitted_keys',
] as const

/** Tables a store may keep from other tables' rows; left to the target when its triggers do so. */
export const DERIVED_TABLES: readonly string[] = ['agent_tags', 'tag_counts']

/** Source tables that are never copied, and why (shown in the report). */
const SKIPPED: [RegExp, string][] = [
  [/^agents_fts(_\w+)?$/, 'SQLite full-text index; the target indexes agents itself'],
  [/^__drizzle_migrations$/, 'schema history; the target has its own migrations'],
  [/^sqlite_/, 'SQLite internal'],
]

/** Rows per INSERT: far below PostgreSQL's 65,535 parameters, large enough that round trips do not dominate. */
export const DEFAULT_BATCH_ROWS = 500

/** Source rows whose keys are looked up in the target per verification query. */
const VERIFY_BATCH_ROWS = 1000

/** SQLSTATE classes of a row the target refuses (integrity, data): the row is reported, the copy goes on. */
const ROW_REFUSED = /^(22|23)/

export interface TableCopy {
  table: string
  /** Rows in the source. */
  sourceRows: number
  /** Rows this run wrote into the target. */
  inserted: number
  /** Source rows the target already had (an earlier run, or the target keeps them itself). */
  present: number
  /** Source rows the target refused (a constraint the source did not enforce); see `refusedReason`. */
  refused: number
  refusedReason?: string
  /** Rows in the target after the copy. */
  targetRows: number
  /** Source rows whose key the verification did not find in the target. */
  missing: number
  /** One missing key, to name it. */
  missingExample?: string
  /** Set when the target maintains the table itself from other rows (its counts are shown, not required). */
  maintainedByTarget?: boolean
}

export interface TablesCopyResult {
  tables: TableCopy[]
  skipped: { table: string; reason: string }[]
  /** Problems that make the copy incomplete, one line each. */
  mismatches: string[]
}

export interface TableCopyOptions {
  batchRows?: number
  /** One line of progress (stderr). */
  progress?: (line: string) => void
}

interface TargetColumn {
  name: string
  udt: string
  nullable: boolean
  hasDefault: boolean
  identityAlways: boolean
}

interface TablePlan {
  table: string
  /** Columns copied, with how each value is converted and cast. */
  columns: { name: string; cast: string; convert: (v: unknown) => unknown }[]
  /** Target primary key columns, all among `columns`; empty when the rows cannot be looked up by key. */
  keyColumns: string[]
  overriding: boolean
  derived: boolean
  /** Columns backed by a sequence (serial, identity) that must be moved past the copied values. */
  sequenced: string[]
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`

/**
 * Copies every table of `source` into `target` and verifies the result. Throws (before writing) when
 * the schemas do not fit together; rows the target refuses are reported as mismatches, not thrown.
 * Run it inside one read transaction of the source so that the copy and its check see one snapshot.
 */
export async function copyTables(source: Database, target: SQL, opts: TableCopyOptions = {}): Promise<TablesCopyResult> {
  const progress = opts.progress ?? (() => {})
  const batchRows = opts.batchRows ?? DEFAULT_BATCH_ROWS
  const { plans, skipped } = await planCopy(source, target)
  const tables: TableCopy[] = []
  const mismatches: string[] = []
  for (const plan of plans) {
    const result: TableCopy = { table: plan.table, sourceRows: 0, inserted: 0, present: 0, refused: 0, targetRows: 0, missing: 0 }
    if (plan.derived) {
      result.maintainedByTarget = true
      result.sourceRows = countRows(source, plan.table)
    } else {
      await copyTable(source, target, plan, batchRows, result, progress)
      await advanceSequences(target, plan)
    }
    tables.push(result)
  }
  // the check runs after every table is in: a derived table is complete only once its sources are
  progress(`verifying ${plans.length} tables`)
  for (const [i, plan] of plans.entries()) {
    const result = tables[i]
    result.targetRows = await countTarget(target, plan.table)
    if (plan.keyColumns.length > 0) await findMissing(source, target, plan, result)
    else result.missing = Math.max(0, result.sourceRows - result.targetRows)
    if (result.maintainedByTarget) continue
    if (result.refused > 0) mismatches.push(`${plan.table}: ${result.refused} row(s) refused by the target (${result.refusedReason})`)
    if (result.missing > 0 && result.missing > result.refused) {
      mismatches.push(`${plan.table}: ${result.missing} source row(s) missing from the target${result.missingExample ? ` (e.g. ${result.missingExample})` : ''}`)
    }
    if (result.targetRows < result.sourceRows && result.missing === 0) {
      mismatches.push(`${plan.table}: the target has ${result.targetRows} rows, the source ${result.sourceRows}`)
    }
  }
  return { tables, skipped, mismatches }
}

/** Decides what is copied where and how; throws when a source table or column has no place in the target. */
async function planCopy(source: Database, target: SQL): Promise<{ plans: TablePlan[]; skipped: { table: string; reason: string }[] }> {
  const sourceTables = source
    .query<{ name: string }, []>(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
    .all()
    .map((r) => r.name)
  const skipped: { table: string; reason: string }[] = []
  const unknown: string[] = []
  for (const name of sourceTables) {
    if ((COPIED_TABLES as readonly string[]).includes(name)) continue
    const rule = SKIPPED.find(([re]) => re.test(name))
    if (rule) skipped.push({ table: name, reason: rule[1] })
    else unknown.push(name)
  }
  if (unknown.length > 0) throw new Error(`the source database has tables this relay does not know how to copy: ${unknown.join(', ')}`)

  const targetColumns = await readTargetColumns(target)
  const problems: string[] = []
  const plans: TablePlan[] = []
  for (const table of COPIED_TABLES) {
    if (!sourceTables.includes(table)) continue
    const columns = targetColumns.get(table)
    if (!columns) {
      problems.push(`table ${table} is missing in the target`)
      continue
    }
    const sourceColumns = source.query<{ name: string; pk: number; type: string }, []>(`PRAGMA table_info(${quote(table)})`).all()
    const sourceNames = new Set(sourceColumns.map((c) => c.name))
    for (const c of sourceColumns) {
      // a surrogate row id may be left out by a target that keys the rows otherwise (e.g. replay_log by signature)
      const surrogate = c.name === 'id' && c.pk === 1 && c.type.toUpperCase() === 'INTEGER'
      if (!columns.has(c.name) && !surrogate) problems.push(`column ${table}.${c.name} is missing in the target`)
    }
    for (const c of columns.values()) {
      if (!sourceNames.has(c.name) && !c.nullable && !c.hasDefault) problems.push(`column ${table}.${c.name} of the target needs a value the source does not have`)
    }
    const copied = [...columns.values()].filter((c) => sourceNames.has(c.name))
    const keys = await primaryKey(target, table)
    plans.push({
      table,
      columns: copied.map((c) => ({ name: c.name, cast: castOf(c.udt), convert: converterFor(c.udt) })),
      keyColumns: keys.every((k) => sourceNames.has(k)) ? keys : [],
      overriding: copied.some((c) => c.identityAlways),
      derived: DERIVED_TABLES.includes(table) && (await maintainedByTriggers(target, table)),
      sequenced: await sequencedColumns(target, table, copied.map((c) => c.name)),
    })
  }
  if (problems.length > 0) throw new Error(`the target schema does not match this relay's: ${problems.join('; ')} (is the target migrated by the same relay version?)`)
  return { plans: await foreignKeyOrder(target, plans), skipped }
}

async function readTargetColumns(target: SQL): Promise<Map<string, Map<string, TargetColumn>>> {
  const rows: { table_name: string; column_name: string; udt_name: string; is_nullable: string; column_default: string | null; is_identity: string; identity_generation: string | null; is_generated: string }[] =
    await target.unsafe(
      `SELECT table_name, column_name, udt_name, is_nullable, column_default, is_identity, identity_generation, is_generated
         FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
    )
  const tables = new Map<string, Map<string, TargetColumn>>()
  for (const r of rows) {
    // a generated column is computed by the target; it cannot be written
    if (r.is_generated === 'ALWAYS') continue
    let columns = tables.get(r.table_name)
    if (!columns) tables.set(r.table_name, (columns = new Map()))
    columns.set(r.column_name, {
      name: r.column_name,
      udt: r.udt_name,
      nullable: r.is_nullable === 'YES',
      hasDefault: r.column_default !== null || r.is_identity === 'YES',
      identityAlways: r.is_identity === 'YES' && r.identity_generation === 'ALWAYS',
    })
  }
  return tables
}

async function primaryKey(target: SQL, table: string): Promise<string[]> {
  const rows: { column_name: string }[] = await target.unsafe(
    `SELECT a.attname AS column_name
       FROM pg_index i
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
      WHERE i.indrelid = to_regclass($1) AND i.indisprimary
      ORDER BY array_position(i.indkey::int2[], a.attnum)`,
    [quote(table)],
  )
  return rows.map((r) => r.column_name)
}

/**
 * Whether a function of the target's schema inserts the rows of `table` (a trigger function deriving it
 * from the rows copied into other tables). A table whose rows the target's store code writes is copied.
 */
async function maintainedByTriggers(target: SQL, table: string): Promise<boolean> {
  const rows: { n: string | number }[] = await target.unsafe(
    `SELECT count(*) AS n FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = current_schema() AND p.prosrc ~* $1
        AND EXISTS (SELECT 1 FROM pg_trigger t WHERE NOT t.tgisinternal)`,
    [`insert\\s+into\\s+("?)${table}\\1\\M`],
  )
  return Number(rows[0]?.n ?? 0) > 0
}

async function sequencedColumns(target: SQL, table: string, columns: string[]): Promise<string[]> {
  const out: string[] = []
  for (const column of columns) {
    const rows: { seq: string | null }[] = await target.unsafe(`SELECT pg_get_serial_sequence($1, $2) AS seq`, [quote(table), column])
    if (rows[0]?.seq) out.push(column)
  }
  return out
}

/** The plans ordered so that a table comes after every table it references (COPIED_TABLES order otherwise). */
async function foreignKeyOrder(target: SQL, plans: TablePlan[]): Promise<TablePlan[]> {
  const rows: { child: string; parent: string }[] = await target.unsafe(
    `SELECT c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent
       FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE c.contype = 'f' AND n.nspname = current_schema()`,
  )
  const unquote = (name: string) => name.replace(/^"(.*)"$/, '$1').replaceAll('""', '"')
  const parents = new Map<string, Set<string>>()
  for (const r of rows) {
    const child = unquote(r.child)
    const parent = unquote(r.parent)
    if (child === parent) continue
    if (!parents.has(child)) parents.set(child, new Set())
    parents.get(child)!.add(parent)
  }
  const names = new Set(plans.map((p) => p.table))
  const done = new Set<string>()
  const ordered: TablePlan[] = []
  while (ordered.length < plans.length) {
    const next = plans.find((p) => !done.has(p.table) && [...(parents.get(p.table) ?? [])].every((q) => done.has(q) || !names.has(q)))
    // a cycle among the copied tables: keep the default order for the rest, the batches will say what fails
    const pick = next ?? plans.find((p) => !done.has(p.table))!
    done.add(pick.table)
    ordered.push(pick)
  }
  return ordered
}

/** The cast of a parameter into a column of this type (`$1::int8`); arrays and unknown types go as text. */
function castOf(udt: string): string {
  return /^[a-z0-9_]+$/.test(udt) ? (udt.startsWith('_') ? `${udt.slice(1)}[]` : udt) : 'text'
}

/** How a SQLite value becomes a parameter for a column of this type. */
function converterFor(udt: string): (v: unknown) => unknown {
  switch (udt) {
    case 'bool':
      // SQLite keeps booleans as 0/1
      return (v) => (v === null || v === undefined ? null : typeof v === 'string' ? v === 'true' || v === '1' || v === 't' : Boolean(Number(v)))
    case 'int2':
    case 'int4':
    case 'int8':
    case 'numeric':
    case 'float4':
    case 'float8':
      return (v) => (v === null || v === undefined ? null : typeof v === 'bigint' ? v.toString() : v)
    case 'timestamptz':
    case 'timestamp':
      // the relay's times are milliseconds since the epoch
      return (v) => (v === null || v === undefined ? null : typeof v === 'number' ? new Date(v).toISOString() : v)
    case 'bytea':
      return (v) => (v === null || v === undefined ? null : typeof v === 'string' ? Buffer.from(v) : v)
    default:
      // text as the PostgreSQL stores write it: U+0000 (which SQLite keeps and PostgreSQL cannot) escaped
      return (v) => (v === null || v === undefined ? null : escapeText(typeof v === 'string' ? v : v instanceof Uint8Array ? Buffer.from(v).toString() : String(v)))
  }
}

function countRows(source: Database, table: string): number {
  return source.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${quote(table)}`).get()?.n ?? 0
}

async function countTarget(target: SQL, table: string): Promise<number> {
  // the mark of the copy under way is not one of the relay's rows
  const where = table === 'relay_state' ? ` WHERE key <> '${MIGRATE_MARK_KEY}'` : ''
  const rows: { n: string | number }[] = await target.unsafe(`SELECT count(*) AS n FROM ${quote(table)}${where}`)
  return Number(rows[0]?.n ?? 0)
}

/** `($1::text,$2::int8),($3::text,$4::int8)…` for `rows` rows of `casts`. */
function valuesList(casts: string[], rows: number): string {
  const tuples: string[] = []
  for (let r = 0, p = 1; r < rows; r++) tuples.push(`(${casts.map((c) => `$${p++}::${c}`).join(',')})`)
  return tuples.join(',')
}

async function copyTable(source: Database, target: SQL, plan: TablePlan, batchRows: number, result: TableCopy, progress: (line: string) => void): Promise<void> {
  const names = plan.columns.map((c) => c.name)
  const casts = plan.columns.map((c) => c.cast)
  const head = `INSERT INTO ${quote(plan.table)} (${names.map(quote).join(',')})${plan.overriding ? ' OVERRIDING SYSTEM VALUE' : ''} VALUES `
  const insert = async (rows: unknown[][]) => {
    const params = rows.flatMap((row) => row.map((v, i) => plan.columns[i].convert(v)))
    const res = await target.unsafe(`${head}${valuesList(casts, rows.length)} ON CONFLICT DO NOTHING`, params)
    return (res as unknown as { count: number }).count
  }
  result.sourceRows = countRows(source, plan.table)
  let batch: unknown[][] = []
  let done = 0
  let lastProgress = 0
  const flush = async () => {
    if (batch.length === 0) return
    const rows = batch
    batch = []
    try {
      result.inserted += await insert(rows)
    } catch (err) {
      if (!ROW_REFUSED.test(String((err as { errno?: unknown }).errno ?? ''))) throw err
      // one row of the batch is refused: insert the rest one by one, count and name the refused ones
      for (const row of rows) {
        try {
          result.inserted += await insert([row])
        } catch (rowErr) {
          if (!ROW_REFUSED.test(String((rowErr as { errno?: unknown }).errno ?? ''))) throw rowErr
          result.refused++
          result.refusedReason ??= (rowErr as Error).message.split('\n')[0]
        }
      }
    }
    done += rows.length
    if (done - lastProgress >= 10 * batchRows || done === result.sourceRows) {
      lastProgress = done
      progress(`${plan.table}: ${done}/${result.sourceRows} rows read, ${result.inserted} new`)
    }
  }
  // row by row from one statement: a large table is never held in memory
  const select = source.query<Record<string, unknown>, []>(`SELECT ${names.map(quote).join(',')} FROM ${quote(plan.table)}`)
  for (const row of select.iterate()) {
    batch.push(names.map((n) => row[n]))
    if (batch.length >= batchRows) await flush()
  }
  await flush()
  if (result.sourceRows === 0) progress(`${plan.table}: empty`)
  result.present = result.sourceRows - result.inserted - result.refused
}

/** Moves each sequence past the largest copied value, so that rows the target creates later get new ids. */
async function advanceSequences(target: SQL, plan: TablePlan): Promise<void> {
  for (const column of plan.sequenced) {
    const [{ seq }]: { seq: string }[] = await target.unsafe(`SELECT pg_get_serial_sequence($1, $2) AS seq`, [quote(plan.table), column])
    const [{ m }]: { m: string | number | null }[] = await target.unsafe(`SELECT max(${quote(column)}) AS m FROM ${quote(plan.table)}`)
    if (m === null) continue
    const [{ last_value, is_called }]: { last_value: string | number; is_called: boolean }[] = await target.unsafe(`SELECT last_value, is_called FROM ${seq}`)
    // only ever forward: rows the target created itself keep their ids
    const next = BigInt(last_value) + (is_called ? 1n : 0n)
    if (next <= BigInt(m)) await target.unsafe(`SELECT setval($1::regclass, $2::int8)`, [seq, String(m)])
  }
}

/** Looks every source key up in the target; counts (and names one of) those that are not there. */
async function findMissing(source: Database, target: SQL, plan: TablePlan, result: TableCopy): Promise<void> {
  const keyCols = plan.keyColumns.map((k) => plan.columns.find((c) => c.name === k)!)
  const casts = keyCols.map((c) => c.cast)
  const alias = keyCols.map((_, i) => `k${i}`)
  const check = async (keys: unknown[][]) => {
    const params = keys.flatMap((key) => key.map((v, i) => keyCols[i].convert(v)))
    const rows: Record<string, unknown>[] = await target.unsafe(
      `SELECT ${alias.join(',')} FROM (VALUES ${valuesList(casts, keys.length)}) AS v(${alias.join(',')})
        WHERE NOT EXISTS (SELECT 1 FROM ${quote(plan.table)} t WHERE ${keyCols.map((c, i) => `t.${quote(c.name)} = v.${alias[i]}`).join(' AND ')})`,
      params,
    )
    result.missing += rows.length
    if (rows.length > 0 && result.missingExample === undefined) {
      result.missingExample = keyCols.map((c, i) => `${c.name}=${String(rows[0][alias[i]])}`).join(', ')
    }
  }
  const select = source.query<Record<string, unknown>, []>(`SELECT ${keyCols.map((c) => quote(c.name)).join(',')} FROM ${quote(plan.table)}`)
  let keys: unknown[][] = []
  for (const row of select.iterate()) {
    keys.push(keyCols.map((c) => row[c.name]))
    if (keys.length >= VERIFY_BATCH_ROWS) {
      await check(keys)
      keys = []
    }
  }
  if (keys.length > 0) await check(keys)
}

/**
 * Copies the replay entries a SQLite relay keeps in `replay.db` beside its database into the target's
 * replay_log, so that a signature the old relay accepted is still refused by the new one. Entries
 * already there are left as they are (expired ones go with the target's next prune). Returns how many
 * were written.
 */
export async function copyReplayLog(replayPath: string, target: SQL, batchRows = DEFAULT_BATCH_ROWS): Promise<number> {
  const { Database } = await import('bun:sqlite')
  const { existsSync } = await import('node:fs')
  if (!existsSync(replayPath)) return 0
  const source = new Database(replayPath, { readonly: true, strict: true })
  try {
    source.run('PRAGMA busy_timeout = 5000')
    const rows = source.query<{ signature: string; expires_at: number }, []>('SELECT signature, expires_at FROM replay_log ORDER BY id').all()
    let written = 0
    for (let i = 0; i < rows.length; i += batchRows) {
      const batch = rows.slice(i, i + batchRows)
      const values = batch.map((_, j) => `($${2 * j + 1}, $${2 * j + 2})`).join(', ')
      const result = await target.unsafe(`INSERT INTO replay_log (signature, expires_at) VALUES ${values} ON CONFLICT (signature) DO NOTHING`, batch.flatMap((r) => [r.signature, r.expires_at]))
      written += (result as { count?: number }).count ?? 0
    }
    return written
  } finally {
    source.close()
  }
}
