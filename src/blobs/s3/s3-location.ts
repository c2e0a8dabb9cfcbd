/**
 * Where an S3-compatible blob store lives: `RELAY_BLOB_STORE=s3://bucket/prefix` plus the standard AWS
 * variables (endpoint, region, credentials), parsed and checked before anything connects.
 */
import { ConfigError } from '../../config/load.ts'

export interface S3Location {
  bucket: string
  /** Key prefix of everything the relay stores: '' or a path ending in '/'. */
  prefix: string
  /**
   * Origin of the requests. A custom endpoint (MinIO, R2, Ceph, s3rver…) is addressed path-style
   * (`endpoint/bucket/key`); AWS itself virtual-hosted (`https://bucket.s3.region.amazonaws.com/key`)
   * unless the bucket name has dots.
   */
  endpoint: string
  virtualHostedStyle: boolean
  region: string
  accessKeyId: string
  secretAccessKey: string
  sessionToken?: string
}

/**
 * The environment the AWS variables are read from (passed in by the configuration layer):
 * AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION (or AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. Nothing else is read.
 */
export type S3Env = Readonly<Record<string, string | undefined>>

/** Bucket names as S3 allows them (lowercase letters, digits, dots, hyphens; 3–63 characters). */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/
/** Prefix characters that need no escaping anywhere (keys, signatures, list prefixes). */
const PREFIX = /^[A-Za-z0-9._\-/]*$/
/** The default when AWS_REGION is not set: AWS's own default, and what most other stores ignore. */
const DEFAULT_REGION = 'us-east-1'

/** Parses and validates `s3://bucket/prefix` and the AWS variables; ConfigError with one line on a problem. */
export function parseS3Location(url: string, env: S3Env, variable = 'RELAY_BLOB_STORE'): S3Location {
  const fail = (what: string): never => {
    throw new ConfigError(`${variable}: ${what}`)
  }
  const m = /^s3:\/\/([^/?#]*)(\/[^?#]*)?$/.exec(url.trim())
  if (!m) fail(`expected s3://bucket/prefix (got ${JSON.stringify(url)})`)
  const [, bucket, rawPrefix = ''] = m as RegExpExecArray
  if (!BUCKET.test(bucket) || bucket.includes('..')) fail(`"${bucket}" is not a valid bucket name (3-63 lowercase letters, digits, dots, hyphens)`)
  const parts = rawPrefix.split('/').filter((p) => p !== '')
  if (!PREFIX.test(rawPrefix) || parts.some((p) => p === '.' || p === '..')) {
    fail(`prefix "${rawPrefix.slice(1)}" may use only letters, digits and . _ - / (and no . or .. segments)`)
  }
  const prefix = parts.length ? `${parts.join('/')}/` : ''

  const region = (env.AWS_REGION || env.AWS_DEFAULT_REGION || DEFAULT_REGION).trim()
  if (!/^[a-z0-9-]+$/.test(region)) fail(`AWS_REGION "${region}" is not a region name`)
  const accessKeyId = env.AWS_ACCESS_KEY_ID?.trim()
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY?.trim()
  if (!accessKeyId || !secretAccessKey) fail(`${url} needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`)

  const custom = env.AWS_ENDPOINT_URL_S3?.trim() || env.AWS_ENDPOINT_URL?.trim()
  let endpoint: string
  if (custom) {
    const which = env.AWS_ENDPOINT_URL_S3?.trim() ? 'AWS_ENDPOINT_URL_S3' : 'AWS_ENDPOINT_URL'
    let parsed: URL | null = null
    try {
      parsed = new URL(custom)
    } catch {
      // reported below
    }
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) fail(`${which} must be an http(s) URL (got ${JSON.stringify(custom)})`)
    const u = parsed as URL
    if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || u.username || u.password) {
      fail(`${which} must be an origin such as http://127.0.0.1:9000, without a path, query or credentials (got ${JSON.stringify(custom)})`)
    }
    endpoint = u.origin
  } else {
    // a bucket name with dots does not match AWS's TLS certificate as a host name: path-style then
    endpoint = bucket.includes('.') ? `https://s3.${region}.amazonaws.com` : `https://${bucket}.s3.${region}.amazonaws.com`
  }
  const sessionToken = env.AWS_SESSION_TOKEN?.trim() || undefined
  return {
    bucket,
    prefix,
    endpoint,
    virtualHostedStyle: !custom && !bucket.includes('.'),
    region,
    accessKeyId: accessKeyId as string,
    secretAccessKey: secretAccessKey as string,
    ...(sessionToken ? { sessionToken } : {}),
  }
}

/** `s3://bucket/prefix at endpoint`: how logs and errors name the store (never the credentials). */
export function describeS3Location(loc: S3Location): string {
  return `s3://${loc.bucket}/${loc.prefix} at ${loc.endpoint}`
}
