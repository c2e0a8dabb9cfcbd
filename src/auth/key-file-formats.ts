/**
 * What a key file may hold, named in the error when it holds none of them: by `--key` (src/auth/sign.ts)
 * and by the console's key import (src/console/app/keys.ts), which cannot load Node's modules.
 */
export const KEY_FILE_FORMATS =
  'relay keygen JSON ({"public_key", "private_key"}), the raw 32-byte Ed25519 seed (what mrp-sdk\'s Keypair.save writes), ' +
  'the 64-byte seed + public key, or the seed as 64 hex characters or as base64/base64url (43 or 44 characters)'
