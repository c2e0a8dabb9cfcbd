/** The ACL endpoints (docs/protocol.md §5): create/change/read/list/delete, ownership, key patterns, the cap. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { RelayClient } from '../../src/client/index.ts'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { agent, unknownKey } from '../messages/helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay()
})
afterAll(() => t.close())

const aclPath = (owner: string, peer?: string) => `/v1/agents/${owner}/acl${peer === undefined ? '' : `/${peer}`}`
const put = (c: RelayClient, peer: string, body: unknown, owner = c.publicKey) => c.transport.send('PUT', aclPath(owner, peer), body)

describe('happy paths', () => {
  test('PUT creates (201), PUT again changes (200), GET reads, DELETE removes (204), then 404', async () => {
    const a = await agent(t)
    const peer = unknownKey()
    const created = await put(a, peer, { entry_type: 'allow' })
    expect(created.status).toBe(201)
    const entry: any = await created.json()
    expect(entry).toEqual({
      id: expect.any(Number),
      owner_key: a.publicKey,
      peer_key: peer,
      entry_type: 'allow',
      created_at: new Date(t.clock.now()).toISOString(),
      updated_at: new Date(t.clock.now()).toISOString(),
    })
    t.clock.advance(5000)
    const changed = await put(a, peer, { entry_type: 'block' })
    expect(changed.status).toBe(200)
    const after: any = await changed.json()
    expect(after.id).toBe(entry.id)
    expect(after.entry_type).toBe('block')
    expect(after.created_at).toBe(entry.created_at)
    expect(after.updated_at).toBe(new Date(t.clock.now()).toISOString())
    const same = await put(a, peer, { entry_type: 'block' })
    expect(same.status).toBe(200)
    expect(await a.acl.get(peer)).toEqual(after)
    const del = await a.transport.send('DELETE', aclPath(a.publicKey, peer))
    expect(del.status).toBe(204)
    expect(await del.text()).toBe('')
    await expectError(await a.transport.send('GET', aclPath(a.publicKey, peer)), 404, 'not_found')
    await expectError(await a.transport.send('DELETE', aclPath(a.publicKey, peer)), 404, 'not_found')
  })

  test('list: JSON array, newest first, entry_type filter; a changed entry keeps its place', async () => {
    const a = await agent(t)
    const peers = [unknownKey(), unknownKey(), unknownKey(), unknownKey()]
    for (const [i, p] of peers.entries()) {
      await a.acl.put(p, i % 2 ? 'block' : 'allow')
      t.clock.advance(1000)
    }
    await a.acl.put(peers[0], 'block') // change the oldest: stays oldest
    const all = await a.acl.list()
    expect(all.map((e) => e.peer_key)).toEqual([...peers].reverse())
    expect((await a.acl.list('allow')).map((e) => e.peer_key)).toEqual([peers[2]])
    expect((await a.acl.list('block')).map((e) => e.peer_key)).toEqual([peers[3], peers[1], peers[0]])
    const empty = await agent(t)
    expect(await empty.acl.list()).toEqual([])
  })
})

describe('errors', () => {
  test('every endpoint is owner-only: 403 forbidden for another agent’s ACL', async () => {
    const [a, b] = [await agent(t), await agent(t)]
    const peer = unknownKey()
    await a.acl.put(peer, 'allow')
    await expectError(await b.transport.send('GET', aclPath(a.publicKey)), 403, 'forbidden')
    await expectError(await b.transport.send('GET', aclPath(a.publicKey, peer)), 403, 'forbidden')
    await expectError(await put(b, peer, { entry_type: 'block' }, a.publicKey), 403, 'forbidden')
    await expectError(await b.transport.send('DELETE', aclPath(a.publicKey, peer)), 403, 'forbidden')
    expect((await a.acl.get(peer)).entry_type).toBe('allow')
  })

  test('peerKey must match the key pattern → 400', async () => {
    const a = await agent(t)
    for (const bad of ['short', unknownKey() + 'A', unknownKey().slice(0, 42) + '%2B']) {
      for (const method of ['GET', 'DELETE']) {
        const e = await expectError(await a.transport.send(method, aclPath(a.publicKey, bad)), 400, 'bad_request')
        expect(e.details.fields.peerKey).toBeTruthy()
      }
      await expectError(await put(a, bad, { entry_type: 'allow' }), 400, 'bad_request')
    }
  })

  test('PUT body: entry_type required, allow|block only (other fields ignored)', async () => {
    const a = await agent(t)
    const peer = unknownKey()
    expect((await put(a, unknownKey(), { entry_type: 'allow', note: 'x', __proto__: 1 })).status).toBe(201)
    for (const body of [{}, { entry_type: 'deny' }, [], 'allow']) {
      await expectError(await put(a, peer, body), 400, 'bad_request')
    }
    await expectError(await a.transport.send('PUT', aclPath(a.publicKey, peer)), 400, 'bad_request')
    await expectError(await a.transport.send('GET', aclPath(a.publicKey) + '?entry_type=deny'), 400, 'bad_request')
    await expectError(await a.transport.send('GET', aclPath(a.publicKey) + '?kind=allow'), 400, 'bad_request')
  })

  test('at most 10,000 entries: the 10,001st → 422; changing an existing one still works', async () => {
    const a = await agent(t)
    const now = t.clock.now()
    // 9,999 entries straight into the database, 500 rows a statement
    for (let from = 0; from < 9_999; from += 500) {
      const ids = Array.from({ length: Math.min(500, 9_999 - from) }, (_, i) => `peer${String(from + i).padStart(39, '0')}`)
      await t.sql(
        `INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES ${ids.map(() => "(?, ?, 'block', ?, ?)").join(', ')}`,
        ids.flatMap((id) => [a.publicKey, id, now, now]),
      )
    }
    expect((await put(a, unknownKey(), { entry_type: 'allow' })).status).toBe(201) // the 10,000th
    const e = await expectError(await put(a, unknownKey(), { entry_type: 'allow' }), 422, 'unprocessable_entity')
    expect(e.details).toEqual({ limit: 10_000 })
    expect((await put(a, `peer${'0'.repeat(39)}`, { entry_type: 'allow' })).status).toBe(200)
    expect((await a.acl.list()).length).toBe(10_000)
    await a.acl.delete(`peer${'0'.repeat(39)}`)
    expect((await put(a, unknownKey(), { entry_type: 'allow' })).status).toBe(201)
  })

  test('the limit holds for PUTs at the same moment: 10,000 entries, never more', async () => {
    const a = await agent(t)
    const now = t.clock.now()
    for (let from = 0; from < 9_998; from += 500) {
      const ids = Array.from({ length: Math.min(500, 9_998 - from) }, (_, i) => `peer${String(from + i).padStart(39, '0')}`)
      await t.sql(
        `INSERT INTO acl_entries (owner_key, peer_key, entry_type, created_at, updated_at) VALUES ${ids.map(() => "(?, ?, 'block', ?, ?)").join(', ')}`,
        ids.flatMap((id) => [a.publicKey, id, now, now]),
      )
    }
    const statuses = (await Promise.all(Array.from({ length: 6 }, () => put(a, unknownKey(), { entry_type: 'allow' })))).map((r) => r.status)
    expect(statuses.sort()).toEqual([201, 201, 422, 422, 422, 422])
    expect(await t.sql('SELECT count(*) AS n FROM acl_entries WHERE owner_key = ?', [a.publicKey])).toEqual([{ n: 10_000 }])
  })

  test('the same entry PUT five times at once: created once, then found', async () => {
    const a = await agent(t)
    const peer = unknownKey()
    const statuses = (await Promise.all(Array.from({ length: 5 }, () => put(a, peer, { entry_type: 'block' })))).map((r) => r.status)
    expect(statuses.sort()).toEqual([200, 200, 200, 200, 201])
    expect(await a.acl.list()).toHaveLength(1)
  })

  test('wrong method on an ACL path → 404 not_found', async () => {
    const a = await agent(t)
    await expectError(await a.transport.send('POST', aclPath(a.publicKey)), 404, 'not_found')
    await expectError(await a.transport.send('PATCH', aclPath(a.publicKey, unknownKey()), { entry_type: 'allow' }), 404, 'not_found')
  })
})

test('deleting an agent removes the ACL entries it owns', async () => {
  const a = await agent(t)
  await a.acl.allow(unknownKey())
  await a.deleteAgent()
  expect(await t.sql('SELECT count(*) AS n FROM acl_entries WHERE owner_key = ?', [a.publicKey])).toEqual([{ n: 0 }])
  expect(await a.acl.list()).toEqual([]) // the key re-appears as a fresh agent
})

describe('MRP forms', () => {
  test('PUT /v1/agents/{key}/acl with {peer_key, entry_type} creates (201) then changes (200) the entry', async () => {
    const a = await agent(t)
    const peer = unknownKey()
    const created = await a.transport.send('PUT', `/v1/agents/${a.publicKey}/acl`, { peer_key: peer, entry_type: 'block' })
    expect(created.status).toBe(201)
    expect(await created.json()).toMatchObject({ owner_key: a.publicKey, peer_key: peer, entry_type: 'block' })
    const changed = await a.transport.send('PUT', '/v1/agents/me/acl', { peer_key: peer, entry_type: 'allow' })
    expect(changed.status).toBe(200)
    expect(((await changed.json()) as any).entry_type).toBe('allow')
    expect((await a.acl.get(peer)).entry_type).toBe('allow')
    const e = await expectError(await a.transport.send('PUT', '/v1/agents/me/acl', { entry_type: 'allow' }), 400, 'bad_request')
    expect(Object.keys(e.details.fields)).toEqual(['peer_key'])
    await expectError(await a.transport.send('PUT', '/v1/agents/me/acl', { peer_key: 'nope', entry_type: 'allow' }), 400, 'bad_request')
    const other = await agent(t)
    await expectError(await a.transport.send('PUT', `/v1/agents/${other.publicKey}/acl`, { peer_key: peer, entry_type: 'allow' }), 403, 'forbidden')
  })
  test('the list filter as type=allow|block', async () => {
    const a = await agent(t)
    const [p1, p2] = [unknownKey(), unknownKey()]
    await a.acl.allow(p1)
    await a.acl.block(p2)
    const allowed: any = await (await a.transport.send('GET', `/v1/agents/${a.publicKey}/acl?type=allow`)).json()
    expect(allowed.map((x: any) => x.peer_key)).toEqual([p1])
    const blocked: any = await (await a.transport.send('GET', `/v1/agents/${a.publicKey}/acl?type=block&entry_type=block`)).json()
    expect(blocked.map((x: any) => x.peer_key)).toEqual([p2])
    await expectError(await a.transport.send('GET', `/v1/agents/${a.publicKey}/acl?type=deny`), 400, 'bad_request')
    await expectError(await a.transport.send('GET', `/v1/agents/${a.publicKey}/acl?type=allow&entry_type=block`), 400, 'bad_request')
    expect(((await (await a.transport.send('GET', `/v1/agents/${a.publicKey}/acl?type=`)).json()) as any).length).toBe(2)
  })
})
