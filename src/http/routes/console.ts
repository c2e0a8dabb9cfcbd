/**
 * /console (and /console/): the web console, a page and one script embedded in the binary. Public
 * like /docs: the page holds no data; everything it shows comes from requests the browser signs with
 * its own key. No outside host is ever named: the script, the styles and the icons are served here.
 */
import { Elysia } from 'elysia'
import { routeAuth } from '../route-auth.ts'
import { consoleScript } from '../../console/bundle.ts' with { type: 'macro' }
import pageHtml from '../../console/index.html' with { type: 'text' }
import styles from '../../console/console.css' with { type: 'text' }

const SCRIPT = consoleScript()
/** The page (a text import; the runtime's typings describe HTML imports as bundles). No inline script, so a strict Content-Security-Policy holds. */
const PAGE = pageHtml as unknown as string
/**
 * Only this origin, for everything: the console cannot call or load from any other host even if
 * asked to (connect-src covers fetch, XHR and the WebSocket of this relay). No inline script or style,
 * no eval, no framing by any site; Trusted Types with no policy make every HTML-parsing DOM sink
 * (innerHTML and the like) throw, so text from a message can only ever become text.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

const headers = (type: string) => ({
  'content-type': type,
  'cache-control': 'no-cache',
  'content-security-policy': CONSOLE_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
})

export function consoleRoutes() {
  const page = () => new Response(PAGE, { headers: headers('text/html; charset=utf-8') })
  return new Elysia({ name: 'routes-console' })
    .use(routeAuth)
    .get('/console', page, { auth: 'public', detail: { hide: true } })
    .get('/console/', page, { auth: 'public', detail: { hide: true } })
    .get('/console/console.js', () => new Response(SCRIPT, { headers: headers('text/javascript; charset=utf-8') }), { auth: 'public', detail: { hide: true } })
    .get('/console/console.css', () => new Response(styles, { headers: headers('text/css; charset=utf-8') }), { auth: 'public', detail: { hide: true } })
}
