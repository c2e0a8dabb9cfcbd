import { describe, expect, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { RelayError } from '../../src/errors.ts'
import { MIGRATION_JOURNAL, MIGRATION_SQL } from '../../src/storage/postgres/embedded-migrations.ts'
import { mapPostgresError } from '../../src/storage/postgres/errors.ts'
import { describeDatabase } from '../../src/storage/postgres/open-postgres.ts'

describe('PostgreSQL storage without a server', () => {
  test('every migration in the journal and in migrations/postgres is embedded', () => {
    const files = readdirSync(join(import.meta.dir, '../../migrations/postgres')).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, ''))
    expect(Object.keys(MIGRATION_SQL).sort()).toEqual(files.sort())
    expect(MIGRATION_JOURNAL.entries.map((e) => e.tag).sort()).toEqual(files.sort())
  })

  test('driver failures map to 503 or 507; anything else passes through', () => {
    const server = (errno: string) => Object.assign(new Error('x'), { code: 'ERR_POSTGRES_SERVER_ERROR', errno })
    const mapped = (err: unknown) => mapPostgresError(err) as RelayError
    expect(mapped(server('53100')).code).toBe('insufficient_storage')
    for (const errno of ['08006', '57P01', '57P03', '53300', '40001', '40P01', '55P03']) {
      expect(mapped(server(errno)).code).toBe('service_unavailable')
      expect(mapped(server(errno)).headers?.['Retry-After']).toBe('1')
    }
    expect(mapped(Object.assign(new Error('Connection closed'), { code: 'ERR_POSTGRES_CONNECTION_CLOSED' })).code).toBe('service_unavailable')
    expect(mapped(Object.assign(new Error('Failed to connect'), { code: 'ERR_POSTGRES_CONNECTION_REFUSED' })).code).toBe('service_unavailable')
    const misuse = Object.assign(new Error('not a tagged call'), { code: 'ERR_POSTGRES_NOT_TAGGED_CALL' })
    expect(mapPostgresError(misuse)).toBe(misuse)
    const unique = server('23505')
    expect(mapPostgresError(unique)).toBe(unique)
    const bug = new TypeError('undefined is not a function')
    expect(mapPostgresError(bug)).toBe(bug)
  })

  test('a database URL is described without its password or parameters', () => {
    expect(describeDatabase('postgres://relay:s3cret@db.internal:6543/relay?sslmode=require')).toBe('postgres://relay@db.internal:6543/relay')
    expect(describeDatabase('postgresql://db/relay')).toBe('postgres://db:5432/relay')
  })
})
