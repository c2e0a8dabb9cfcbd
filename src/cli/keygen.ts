import { closeSync, openSync, writeSync } from 'node:fs'
import { resolve } from 'node:path'
import { encodeKeyFile, generateKeyPair } from '../auth/sign.ts'

/** `relay keygen [--out FILE]`: a new key file (mode 0600), never overwriting; prints the public key. */
export function keygen(flags: Record<string, string>): void {
  const path = resolve(flags.out ?? 'relay.key')
  const keys = generateKeyPair()
  let fd: number
  try {
    fd = openSync(path, 'wx', 0o600) // wx: fail if the file exists
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new Error(code === 'EEXIST' ? `${path} already exists; not overwriting it` : `cannot create ${path}: ${(err as Error).message}`)
  }
  writeSync(fd, encodeKeyFile(keys))
  closeSync(fd)
  process.stdout.write(flags.json === 'true' ? JSON.stringify({ public_key: keys.publicKey, key_file: path }) + '\n' : `${keys.publicKey}\n`)
}
