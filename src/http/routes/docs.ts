/**
 * /v1/openapi.json generated from the route schemas, and /docs: the Scalar reference served from a copy
 * embedded in the binary, so the page renders without internet access.
 */
import { openapi } from '@elysiajs/openapi'
import { Elysia } from 'elysia'
// embedded as a file, not a string: served from the executable without sitting on the JS heap
import scalarBundlePath from '../../../node_modules/@scalar/api-reference/dist/browser/standalone.js' with { type: 'file' }

export function docsRoutes(version: string) {
  return new Elysia({ name: 'routes-docs' })
    .use(
      openapi({
        path: '/docs',
        specPath: '/v1/openapi.json',
        provider: 'scalar',
        scalar: { cdn: '/docs/scalar.js', withDefaultFonts: false, hideClientButton: true } as never,
        exclude: { paths: ['/docs', '/docs/scalar.js', '/metrics'] },
        documentation: {
          info: {
            title: 'Agent Relay',
            version,
            description:
              'Self-hosted message relay for AI agents. Every endpoint except /v1/health*, /v1/openapi.json and /docs ' +
              'requires the three X-M2M-* headers: an Ed25519 signature over METHOD\\nPATH\\nTIMESTAMP\\nBODY_HASH.',
          },
          components: {
            securitySchemes: {
              publicKey: { type: 'apiKey', in: 'header', name: 'X-M2M-Public-Key' },
              timestamp: { type: 'apiKey', in: 'header', name: 'X-M2M-Timestamp' },
              signature: { type: 'apiKey', in: 'header', name: 'X-M2M-Signature' },
            },
          },
          security: [{ publicKey: [], timestamp: [], signature: [] }],
        },
      }),
    )
    .get(
      '/docs/scalar.js',
      () => new Response(Bun.file(scalarBundlePath), { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=86400' } }),
      { detail: { hide: true } },
    )
}
