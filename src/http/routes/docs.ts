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
const EXCLUDE = { paths: ['/docs', '/docs/', '/docs/scalar.js', '/docs/init.js', '/docs/start.js', '/metrics', '/console', '/console/', '/console/console.js', '/console/console.css', DOCUMENT_PATH] }

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
<script type="application/json" id="scalar-config">${JSON.stringify(SCALAR_CONFIG).replace(/</g, '\\u003c')}</script>
<script src="/docs/init.js"></script>
<script src="/docs/scalar.js"></script>
<script src="/docs/start.js"></script>
</body>
</html>
`

/** Starts the reference with the configuration the page carries as data (no inline script, so the CSP needs none); runs last. */
const START = "Scalar.createApiReference('#app', JSON.parse(document.getElementById('scalar-config').textContent))\n"

/**
 * Runs first. The page is sandboxed into an origin of its own (see DOCS_CSP), where the browser
 * refuses localStorage and sessionStorage; the reference keeps its preferences there, so it gets
 * storage that lives in memory for the page's life instead.
 */
const INIT = `(() => {
  const memory = () => {
    const m = new Map()
    return {
      get length() { return m.size },
      key: (i) => [...m.keys()][i] ?? null,
      getItem: (k) => (m.has(String(k)) ? m.get(String(k)) : null),
      setItem: (k, v) => void m.set(String(k), String(v)),
      removeItem: (k) => void m.delete(String(k)),
      clear: () => m.clear(),
    }
  }
  for (const name of ['localStorage', 'sessionStorage']) {
    try {
      window[name]
    } catch {
      Object.defineProperty(window, name, { value: memory(), configurable: true })
    }
  }
})()
`

/**
 * The page shares its address with the console, which keeps an agent's key in this origin's
 * IndexedDB. `sandbox` (without allow-same-origin) runs the page in an opaque origin of its own: its
 * scripts can reach no storage, cookie or window of the relay's origin, so they can neither read nor
 * use the console's key. Only this relay's own scripts run (no inline script, no eval), it talks to
 * this relay only, and no other site may frame it. Scalar injects its styles at run time, hence
 * 'unsafe-inline' for styles only.
 */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'; sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox allow-downloads"

const securityHeaders = { 'content-security-policy': DOCS_CSP, 'x-frame-options': 'DENY', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' }

export function docsRoutes(version: string) {
  let cached: { routes: number; doc: unknown } | undefined
  const app = new Elysia({ name: 'routes-docs' })
    .use(routeAuth)
  const page = () => new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache', ...securityHeaders } })
  return app
    .get(
      DOCUMENT_PATH,
      ({ set }) => {
        // public, unsigned and the same for everyone: readable by any page, including /docs, which runs sandboxed in an origin of its own
        set.headers['access-control-allow-origin'] = '*'
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
      () => new Response(Bun.file(scalarBundlePath), { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=86400', ...securityHeaders } }),
      { auth: 'public', detail: { hide: true } },
    )
    .get('/docs/init.js', () => new Response(INIT, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', ...securityHeaders } }), { auth: 'public', detail: { hide: true } })
    .get('/docs/start.js', () => new Response(START, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', ...securityHeaders } }), { auth: 'public', detail: { hide: true } })
}
