/**
 * /v1/openapi.json, generated from the route schemas and finished by `finishDocument`, and /docs (also
 * /docs/): the Scalar reference served from a copy embedded in the binary. The page is configured so
 * that loading it calls no outside host: no request proxy, no telemetry, no fonts, no AI agent, no
 * developer toolbar or cloud buttons (test/docs/docs-page.test.ts records every request a browser makes).
 */
import { toOpenAPISchema } from '@elysiajs/openapi'
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
// embedded as a file, not a string: served from the executable without sitting on the JS heap
import scalarBundlePath from '../../../node_modules/@scalar/api-reference/dist/browser/standalone.js' with { type: 'file' }
import { EXAMPLE, finishDocument } from '../openapi-document.ts'

const DOCUMENT_PATH = '/v1/openapi.json'
const EXCLUDE = { paths: ['/docs', '/docs/', '/docs/scalar.js', '/metrics', '/console', '/console/', '/console/console.js', '/console/console.css', DOCUMENT_PATH] }

/** Scalar's options; every one that could reach a Scalar-hosted service is switched off. */
export const SCALAR_CONFIG = {
  url: DOCUMENT_PATH,
  // "" = send test requests straight to the relay, never through Scalar's cloud proxy
  proxyUrl: '',
  telemetry: false,
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  documentDownloadType: 'json',
  metaData: { title: 'Agent Relay API' },
  // realistic values in the request examples instead of YOUR_SECRET_TOKEN: the worked example of docs/protocol.md §1
  authentication: {
    preferredSecurityScheme: [['publicKey', 'timestamp', 'signature']],
    securitySchemes: {
      publicKey: { value: EXAMPLE.publicKey },
      timestamp: { value: EXAMPLE.timestamp },
      signature: { value: EXAMPLE.signature },
    },
  },
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent Relay API</title>
<meta name="description" content="API reference of this Agent Relay: signed requests, messages, blobs, WebSocket and webhooks.">
</head>
<body>
<div id="app"></div>
<script src="/docs/scalar.js"></script>
<script>Scalar.createApiReference('#app', ${JSON.stringify(SCALAR_CONFIG).replace(/</g, '\\u003c')})</script>
</body>
</html>
`

export function docsRoutes(version: string) {
  let cached: { routes: number; doc: unknown } | undefined
  const app = new Elysia({ name: 'routes-docs' })
    .use(routeAuth)
  const page = () => new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' } })
  return app
    .get(
      DOCUMENT_PATH,
      () => {
        // the same count the openapi plugin uses to know when routes were added (a protected method)
        const routes = (app as unknown as { getGlobalRoutes(): unknown[] }).getGlobalRoutes().length
        if (cached?.routes !== routes) {
          const { paths, components } = toOpenAPISchema(app, EXCLUDE, undefined, undefined, '3.1.2')
          cached = { routes, doc: finishDocument({ openapi: '3.1.0', paths, components }, version) }
        }
        return cached.doc
      },
      { auth: 'public', detail: { hide: true } },
    )
    .get('/docs', page, { auth: 'public', detail: { hide: true } })
    .get('/docs/', page, { auth: 'public', detail: { hide: true } })
    .get(
      '/docs/scalar.js',
      () => new Response(Bun.file(scalarBundlePath), { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=86400' } }),
      { auth: 'public', detail: { hide: true } },
    )
}
