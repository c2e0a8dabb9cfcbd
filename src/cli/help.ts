import { OPTIONS } from '../config/options.ts'
import { clientCommandsSummary } from './client-cli.ts'

export const HELP = `relay — a self-hosted message relay for AI agents

Running a relay:
  relay [serve] [--port N] [--host ADDR] [--data-dir DIR] [--config FILE] [--log-level LEVEL]
  relay admin suspend KEY [--reason TEXT] [--data-dir DIR]
  relay admin unsuspend KEY [--data-dir DIR]
  relay admin stats [--json] [--data-dir DIR]
  relay admin agents [--status S] [--limit N] [--cursor C] [--json] [--data-dir DIR]
  relay admin allow KEY [--note TEXT] | revoke KEY | allowed [--json]
  relay admin webhooks [--limit N] [--json]
  relay backup FILE [--json] [--data-dir DIR]
  relay migrate --to postgres://… [--blobs s3://bucket/prefix] [--json] [--data-dir DIR]
  relay health [--url URL] [--timeout SECONDS] [--json]

Using a relay as an agent (--relay URL, --key FILE, --json on every command):
  relay keygen [--out FILE] [--json]
${clientCommandsSummary()}

  relay completion bash|zsh

For an LLM host (MCP):
  relay mcp [--relay URL] [--key FILE] [--http HOST:PORT]   the relay as MCP tools (stdio, or Streamable HTTP)

  relay --version
  relay --help | relay COMMAND --help

Configuration: defaults ← relay.config.ts (or --config FILE) ← RELAY_* environment ← flags.
Run "relay serve --help" for every option. RELAY_CONFIG=FILE names the configuration file like --config.
Errors are printed as "relay: error: …"; exit codes: 0 success, 1 failure, 2 usage error.
Protocol reference: docs/protocol.md; API reference: /docs on a running relay.
`

const COMMAND_HELP: Record<string, string> = {
  serve: `relay serve — start the relay (the default command)

Flags:
  --port N           listen port (RELAY_PORT, default 8080)
  --host ADDR        listen address (RELAY_HOST, default 127.0.0.1)
  --data-dir DIR     database and blobs (RELAY_DATA_DIR, default ./data)
  --config FILE      configuration file (RELAY_CONFIG; default ./relay.config.ts when present)
  --log-level LEVEL  debug | info | warn | error (RELAY_LOG_LEVEL)

Every option also has a flag (relay.config.ts key, environment variable, flag, default):
${OPTIONS.map((o) => `  ${o.key.padEnd(30)} ${o.env.padEnd(36)} ${o.flag.padEnd(36)} ${String(o.default)}`).join('\n')}

The start-up log line names the relay_url that agent commands on this machine should use
(export RELAY_URL=… or pass --relay …); they default to http://127.0.0.1:8080.
SIGTERM or SIGINT stops gracefully: requests finish, sockets close with 1001, the WAL is checkpointed.
`,
  health: `relay health [--url URL] [--timeout SECONDS] [--json] — is the relay ready to serve?

Asks GET /v1/health/ready and exits 0 when it answers 200, 1 otherwise (not ready, refused, no answer
within --timeout, default 5 s). Without --url it asks the relay this machine's configuration
describes (RELAY_HOST, RELAY_PORT, --config / RELAY_CONFIG / relay.config.ts), over loopback when it
listens on every address. For container health checks and systemd:
  HEALTHCHECK CMD ["relay", "health"]
  ExecStartPost=/usr/local/bin/relay health --timeout 10
`,
  completion: `relay completion bash|zsh — print a shell completion script

  source <(relay completion bash)                          # this shell; add it to ~/.bashrc to keep it
  relay completion bash | sudo tee /etc/bash_completion.d/relay
  source <(relay completion zsh)                           # in ~/.zshrc, after compinit
`,
  keygen: `relay keygen [--out FILE] [--json] — create an Ed25519 key file (mode 0600, default ./relay.key)
and print its public key. An existing file is never overwritten.
`,
  admin: `relay admin — operator commands on the data directory, while the relay runs or not

  relay admin suspend KEY [--reason TEXT]   block an agent (an unknown key is blocked for good)
  relay admin unsuspend KEY                 reinstate it
  relay admin stats [--json]                agents, messages by status, blobs, webhooks, database size
  relay admin agents [--status active|suspended] [--limit N] [--cursor C] [--json]
                                            every agent with its status, oldest first, paged (default 100)
  relay admin allow KEY [--note TEXT]       admit a key (RELAY_ADMISSION=allowlist lets only these in)
  relay admin revoke KEY                    take it off the allowlist
  relay admin allowed [--json]              the allowlist
  relay admin webhooks [--limit N] [--json] webhook deliveries waiting, the soonest due first

The data directory is found like serve finds it: --data-dir, RELAY_DATA_DIR, --config FILE.
A running relay applies suspensions and allowlist changes within 1 s. The same actions are
offered over HTTP to the keys in RELAY_ADMIN_KEYS (/v1/admin/…, and the console at /console).
`,
  backup: `relay backup FILE [--json] [--data-dir DIR] — a consistent copy of the database

Safe while the relay serves: the copy is one snapshot, written under a temporary name and moved into
place; an existing FILE is never overwritten. Blob files are not in it: copy the blobs/ directory of
the data directory after the database (see README, "Backup and restore").
`,
  migrate: `relay migrate --to postgres://USER:PASS@HOST:5432/DB [--blobs s3://BUCKET/PREFIX] [--json] [--data-dir DIR]
— move a single relay's data into cluster storage

Stop the relay first: the command refuses while a process has the database open. It reads the data
directory (found like serve finds it: --data-dir, RELAY_DATA_DIR, --config FILE) without changing it,
creates or upgrades the PostgreSQL schema, copies every table (agents, messages with their attachment
links, ACLs, webhooks and pending deliveries, the replay window, the allowlist, blob records, relay
state) and, with --blobs, the blob bytes into the bucket (endpoint and credentials from the AWS_*
variables, as for RELAY_BLOB_STORE). Without --blobs only the records move: the bytes stay where the
relay kept them, and the new relays must use that blob store.

Then it checks that every source row is in the target (by key) and that every copied blob hashes to
its address, and prints a report (--json: machine-readable; progress goes to stderr). Exit 0 when
everything arrived, 1 naming what did not. Rows and blobs already in the target are left as they are,
so it is safe to run again: a second run copies nothing and checks again.

  --batch N   rows per INSERT (default 500)

Afterwards start the relays with RELAY_DATABASE_URL (and RELAY_BLOB_STORE) set; see docs/operations.md.
`,
}

export function commandHelp(name: string): string {
  return COMMAND_HELP[name] ?? HELP
}
