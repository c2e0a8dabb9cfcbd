/**
 * The Prometheus text exposition format, version 0.0.4: the escaping rules and number forms that a
 * scraper expects (https://prometheus.io/docs/instrumenting/exposition_formats/).
 */

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/

export function isMetricName(name: string): boolean {
  return NAME.test(name)
}

/** Label names may not start with `__` (reserved) and `le` belongs to histograms. */
export function isLabelName(name: string): boolean {
  return LABEL.test(name) && !name.startsWith('__')
}

/** HELP text: backslash and line feed are escaped. */
export function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')
}

/** Label values: backslash, double quote and line feed are escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

/** Numbers as Go's ParseFloat reads them, with the special values spelled the Prometheus way. */
export function formatValue(n: number): string {
  if (Number.isNaN(n)) return 'NaN'
  if (n === Infinity) return '+Inf'
  if (n === -Infinity) return '-Inf'
  return String(n)
}

/** `{a="1",b="x"}`, or the empty string when there are no labels. */
export function formatLabels(names: readonly string[], values: readonly string[]): string {
  if (names.length === 0) return ''
  return `{${names.map((n, i) => `${n}="${escapeLabelValue(values[i] ?? '')}"`).join(',')}}`
}
