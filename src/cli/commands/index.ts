/**
 * Every agent-side command, in the order `relay --help` lists them. Adding a command is one file in
 * this folder and one entry here.
 */
import type { CommandSpec } from './command.ts'
import { acl } from './acl.ts'
import { agentDelete } from './agent.ts'
import { blob } from './blob.ts'
import { capabilities } from './capabilities.ts'
import { discover } from './discover.ts'
import { download } from './download.ts'
import { get } from './get.ts'
import { inbox } from './inbox.ts'
import { poll } from './poll.ts'
import { listen } from './listen.ts'
import { profileGet, profileSet } from './profile.ts'
import { send } from './send.ts'
import { status } from './status.ts'
import { thread } from './thread.ts'
import { upload } from './upload.ts'
import { webhook } from './webhook.ts'
import { whoami } from './whoami.ts'

export const CLIENT_COMMANDS: CommandSpec[] = [
  whoami,
  profileGet,
  profileSet,
  send,
  poll,
  listen,
  inbox,
  get,
  status,
  thread,
  upload,
  download,
  ...blob,
  ...acl,
  ...webhook,
  discover,
  capabilities,
  agentDelete,
]
