/** A few DOM helpers: elements from a tag, attributes and children, with no templating and no innerHTML. */

type Child = Node | string | number | null | undefined | false | Child[]
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>

/** `h('button', {type: 'button', onclick: f}, 'Send')`; `on…` attributes are listeners, booleans toggle. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value)
    else if (name === 'value' && 'value' in el) (el as HTMLInputElement).value = String(value)
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  append(el, children)
  return el
}

function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    if (Array.isArray(c)) append(el, c)
    else el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c)
  }
}

/** Replaces every child of `el`. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren()
  append(el, children)
}

let ids = 0
/** A labelled form field: the label names the control for assistive technology. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLElement {
  const id = control.id || `f${++ids}`
  control.id = id
  const hintEl = hint ? h('small', { id: `${id}-hint`, class: 'hint' }, hint) : null
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id)
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hintEl)
}

/**
 * The `pattern` of public-key inputs. Browsers compile `pattern` with the `v` flag, where a `-` left
 * unescaped in a class is a syntax error and the check is silently dropped: it is escaped here.
 */
export const KEY_PATTERN = '[A-Za-z0-9_\\-]{43}'

/** A short key for display: the first and last characters. */
export const shortKey = (key: string): string => (key.length > 16 ? `${key.slice(0, 8)}…${key.slice(-6)}` : key)

export const when = (iso: string | undefined): string => (iso ? new Date(iso).toLocaleString() : '')

const SVG = 'http://www.w3.org/2000/svg'
/** An SVG element (drawn by the console itself: no image or font is fetched). */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, ...children: (SVGElement | string)[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag)
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v))
  for (const c of children) el.append(c)
  return el
}

/** A padlock, in the text's colour; `label` names it for assistive technology (else it is decoration). */
export function lockIcon(label?: string): SVGSVGElement {
  const icon = svg(
    'svg',
    { class: 'lock-icon', viewBox: '0 0 16 16', width: 14, height: 14, ...(label ? { role: 'img', 'aria-label': label } : { 'aria-hidden': 'true' }) },
    svg('rect', { x: 2.5, y: 7, width: 11, height: 8, rx: 1.5, fill: 'currentColor' }),
    svg('path', { d: 'M5 7V5a3 3 0 0 1 6 0v2', fill: 'none', stroke: 'currentColor', 'stroke-width': 1.8 }),
  )
  if (label) icon.append(svg('title', {}, label))
  return icon
}
