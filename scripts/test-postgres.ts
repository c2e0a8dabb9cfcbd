/**
 * The second half of `npm test`: the API suites again, with every in-process relay on PostgreSQL
 * (RELAY_TEST_BACKEND=postgres: a database of its own per relay on a temporary server, see
 * test/support/backend.ts). A behaviour that differs between the backends fails here.
 *
 * Without PostgreSQL installed it says so in one line and passes; under CI=true it fails instead.
 * Arguments, if any, name the test files or folders to run instead of the API suites.
 */
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { findPostgres } from '../test/support/postgres.ts'

/** Folders whose tests drive in-process relays through the API. */
const SUITES = ['acl', 'admin', 'admission', 'agents', 'auth', 'blobs', 'discovery', 'errors', 'messages', 'realtime', 'security', 'webhooks']

/** Files of other folders that drive in-process relays (their neighbours drive the binary, or no relay). */
const FILES = [
  'client/encryption.test.ts',
  'client/errors.test.ts',
  'console/operator-chart.test.ts',
  'console/traffic.test.ts',
  'cli/declaration.test.ts',
  'cli/key-file.test.ts',
  'cli/realtime-commands.test.ts',
  'fuzz/fuzz.test.ts',
  'ops/metrics.test.ts',
  'docs/openapi.test.ts',
]

/** Files of those folders that run once only (on SQLite), and why: SQLite internals, or no storage at all. */
export const FIRST_RUN_ONLY: Record<string, string> = {
  'discovery/index-maintenance.test.ts': "SQLite's trigger-maintained FTS5 and tag indexes, and its own schema upgrade",
  'discovery/query-plan.test.ts': "SQLite's EXPLAIN QUERY PLAN of the discovery statements",
  'discovery/params.test.ts': 'unit tests of the FTS5 expression SQLite storage builds (no relay)',
  'messages/units.test.ts': 'unit tests without a relay (rate limiter, cursors on an in-memory SQLite)',
  'admin/cli-parity.test.ts': '`relay admin` on a data directory (the compiled binary, its SQLite file)',
  'auth/vectors.test.ts': 'canonical strings and signatures (no storage)',
  'auth/canonical-scalar.test.ts': 'canonical strings (no storage)',
  'auth/verify-pool.test.ts': 'the signature worker (no storage)',
  'security/replay-soak.test.ts': "SQLite's replay log file and WALs under a sustained rate (on PostgreSQL: test/storage/postgres-cluster.test.ts prunes the shared log)",
}

const args = process.argv.slice(2)
const root = join(import.meta.dir, '..')
const files = SUITES.flatMap((dir) =>
  readdirSync(join(root, 'test', dir))
    .filter((f) => f.endsWith('.test.ts') && !(`${dir}/${f}` in FIRST_RUN_ONLY))
    .map((f) => `./test/${dir}/${f}`),
).concat(FILES.map((f) => `./test/${f}`))

if (!findPostgres()) {
  const line = 'API suites on PostgreSQL: skipped, postgresql is not installed (bash .ci/run installs it)'
  if (process.env.CI === 'true') {
    console.error(line.replace('skipped', 'cannot run under CI=true'))
    process.exit(1)
  }
  console.log(line)
  process.exit(0)
}

console.log(`API suites on PostgreSQL: ${args.length ? args.join(' ') : `${files.length} files`} (RELAY_TEST_BACKEND=postgres)`)
const proc = Bun.spawn([process.execPath, 'test', '--preload', './test/support/backend-preload.ts', ...(args.length ? args : files)], {
  cwd: root,
  env: { ...process.env, RELAY_TEST_BACKEND: 'postgres' },
  stdio: ['inherit', 'inherit', 'inherit'],
})
process.exit(await proc.exited)
