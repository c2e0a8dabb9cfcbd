/** Inbox policies × ACL entries (docs/protocol.md §4.3 step 6), on the HTTP path and on the service path. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { expectError, startTestRelay, type TestRelay } from '../support/harness.ts'
import { UNLIMITED, agent, msg, rawSend } from '../messages/helpers.ts'

let t: TestRelay
beforeAll(async () => {
  t = await startTestRelay(UNLIMITED)
})
afterAll(() => t.close())

type Policy = 'open' | 'closed' | 'allowlist' | 'blocklist'
type Entry = 'none' | 'allow' | 'block'

const EXPECTED: Record<Policy, Record<Entry, boolean>> = {
  open: { none: true, allow: true, block: true },
  closed: { none: false, allow: false, block: false },
  allowlist: { none: false, allow: true, block: false },
  blocklist: { none: true, allow: true, block: false },
}

describe('inbox policy × ACL entry', () => {
  for (const [policy, row] of Object.entries(EXPECTED) as [Policy, Record<Entry, boolean>][]) {
    for (const [entry, accepted] of Object.entries(row) as [Entry, boolean][]) {
      test(`${policy} with ${entry === 'none' ? 'no entry' : `an ${entry} entry`} → ${accepted ? '201' : '403 acl_denied'}`, async () => {
        const sender = await agent(t)
        const recipient = await agent(t, { inbox_policy: policy })
        if (entry !== 'none') await recipient.acl.put(sender.publicKey, entry)
        const res = await rawSend(sender, msg(recipient))
        if (accepted) expect(res.status).toBe(201)
        else await expectError(res, 403, 'acl_denied')
        // the WebSocket send path calls the same service method
        const senderRow = (await t.relay.storage.agents.find(sender.publicKey))!
        const viaService = () => t.relay.features.messages.messages.send(senderRow, msg(recipient))
        if (accepted) expect((await viaService()).status).toBe('sent')
        else await expect(viaService()).rejects.toMatchObject({ code: 'acl_denied' })
        // nothing refused reaches the inbox
        const inbox = await recipient.poll()
        expect(inbox.messages.length).toBe(accepted ? 2 : 0)
      })
    }
  }

  test('the default policy is blocklist: strangers get in, blocked senders do not', async () => {
    const [a, b, c] = [await agent(t), await agent(t), await agent(t)]
    expect((await b.getAgent()).inbox_policy).toBe('blocklist')
    await b.acl.block(c.publicKey)
    expect((await rawSend(a, msg(b))).status).toBe(201)
    await expectError(await rawSend(c, msg(b)), 403, 'acl_denied')
  })

  test('entries of other owners do not matter', async () => {
    const [a, b, c] = [await agent(t), await agent(t, { inbox_policy: 'allowlist' }), await agent(t)]
    await c.acl.allow(a.publicKey) // c's allow says nothing about b's inbox
    await expectError(await rawSend(a, msg(b)), 403, 'acl_denied')
  })

  test('changes apply to the next send: allow → block → delete', async () => {
    const [a, b] = [await agent(t), await agent(t, { inbox_policy: 'allowlist' })]
    await expectError(await rawSend(a, msg(b)), 403, 'acl_denied')
    await b.acl.allow(a.publicKey)
    expect((await rawSend(a, msg(b))).status).toBe(201)
    await b.acl.block(a.publicKey)
    await expectError(await rawSend(a, msg(b)), 403, 'acl_denied')
    await b.updateProfile({ inbox_policy: 'open' })
    expect((await rawSend(a, msg(b))).status).toBe(201)
    await b.updateProfile({ inbox_policy: 'blocklist' })
    await expectError(await rawSend(a, msg(b)), 403, 'acl_denied')
    await b.acl.delete(a.publicKey)
    expect((await rawSend(a, msg(b))).status).toBe(201)
  })

  test('a suspended recipient is 403 forbidden even with an allow entry and an open inbox', async () => {
    const [a, b] = [await agent(t), await agent(t, { inbox_policy: 'open' })]
    await b.acl.allow(a.publicKey)
    await t.relay.services.agents.suspend(b.publicKey, null)
    await expectError(await rawSend(a, msg(b)), 403, 'forbidden')
  })
})
