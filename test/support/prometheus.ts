/**
 * A strict reader of the Prometheus text format 0.0.4 for tests: every line must be a well-formed
 * HELP, TYPE, comment or sample; samples must belong to the family declared before them; histogram
 * buckets must be cumulative and end in +Inf equal to _count.
 */
export interface PromSample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface PromFamily {
  name: string
  type: string
  help: string
  samples: PromSample[]
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/

function unescape(text: string, allowQuote: boolean): string {
  return text.replace(/\\(.)/g, (_m, c) => {
    if (c === 'n') return '\n'
    if (c === '\\') return '\\'
    if (c === '"' && allowQuote) return '"'
    throw new Error(`bad escape \\${c}`)
  })
}

function parseValue(text: string): number {
  if (text === '+Inf') return Infinity
  if (text === '-Inf') return -Infinity
  if (text === 'NaN') return NaN
  if (!/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad value "${text}"`)
  return Number(text)
}

function parseSample(line: string): PromSample {
  const m = NAME.exec(line)
  if (!m) throw new Error(`bad sample name in "${line}"`)
  const name = m[0]
  let rest = line.slice(name.length)
  const labels: Record<string, string> = {}
  if (rest.startsWith('{')) {
    rest = rest.slice(1)
    while (!rest.startsWith('}')) {
      const ln = LABEL_NAME.exec(rest)
      if (!ln) throw new Error(`bad label name in "${line}"`)
      rest = rest.slice(ln[0].length)
      if (!rest.startsWith('="')) throw new Error(`expected =" in "${line}"`)
      rest = rest.slice(2)
      let i = 0
      while (i < rest.length && rest[i] !== '"') i += rest[i] === '\\' ? 2 : 1
      if (i >= rest.length) throw new Error(`unterminated label value in "${line}"`)
      if (ln[0] in labels) throw new Error(`duplicate label ${ln[0]} in "${line}"`)
      labels[ln[0]] = unescape(rest.slice(0, i), true)
      rest = rest.slice(i + 1)
      if (rest.startsWith(',')) rest = rest.slice(1)
      else if (!rest.startsWith('}')) throw new Error(`expected , or } in "${line}"`)
    }
    rest = rest.slice(1)
  }
  const parts = rest.trim().split(/\s+/)
  if (!rest.startsWith(' ') || parts.length < 1 || parts.length > 2) throw new Error(`bad sample "${line}"`)
  if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`bad timestamp in "${line}"`)
  return { name, labels, value: parseValue(parts[0]) }
}

export function parsePrometheus(text: string): Map<string, PromFamily> {
  if (text !== '' && !text.endsWith('\n')) throw new Error('the exposition must end with a line feed')
  const families = new Map<string, PromFamily>()
  let current: PromFamily | undefined
  for (const line of text.split('\n').slice(0, -1)) {
    if (line.startsWith('# HELP ') || line.startsWith('# TYPE ')) {
      const [, kw, name, ...rest] = line.split(' ')
      if (!NAME.test(name) || NAME.exec(name)?.[0] !== name) throw new Error(`bad family name in "${line}"`)
      let fam = families.get(name)
      if (!fam) {
        fam = { name, type: 'untyped', help: '', samples: [] }
        families.set(name, fam)
      } else if (fam.samples.length > 0) throw new Error(`${kw} for ${name} after its samples`)
      if (kw === 'HELP') fam.help = unescape(rest.join(' '), false)
      else {
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest[0] ?? '')) throw new Error(`bad type in "${line}"`)
        fam.type = rest[0]
      }
      current = fam
      continue
    }
    if (line.startsWith('#') || line.trim() === '') continue
    const sample = parseSample(line)
    const base = current?.type === 'histogram' ? sample.name.replace(/_(bucket|sum|count)$/, '') : sample.name
    if (!current || base !== current.name) throw new Error(`sample ${sample.name} outside its family (after ${current?.name})`)
    current.samples.push(sample)
  }
  for (const fam of families.values()) if (fam.type === 'histogram') checkHistogram(fam)
  return families
}

function checkHistogram(fam: PromFamily): void {
  const series = new Map<string, PromSample[]>()
  for (const s of fam.samples) {
    if (!s.name.endsWith('_bucket')) continue
    const { le, ...rest } = s.labels
    if (le === undefined) throw new Error(`${fam.name} bucket without le`)
    const key = JSON.stringify(rest)
    series.set(key, [...(series.get(key) ?? []), s])
  }
  for (const [key, buckets] of series) {
    let last = -Infinity
    let prev = 0
    for (const b of buckets) {
      const le = parseValue(b.labels.le)
      if (le <= last) throw new Error(`${fam.name} buckets not increasing`)
      if (b.value < prev) throw new Error(`${fam.name} buckets not cumulative`)
      last = le
      prev = b.value
    }
    if (last !== Infinity) throw new Error(`${fam.name} has no +Inf bucket`)
    const count = fam.samples.find((s) => s.name === `${fam.name}_count` && JSON.stringify(s.labels) === key)
    if (!count || count.value !== prev) throw new Error(`${fam.name} _count differs from the +Inf bucket`)
  }
}

/** The value of one sample whose labels include `labels`; undefined when there is none. */
export function sampleValue(families: Map<string, PromFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  const fam = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ''))
  const s = fam?.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
  return s?.value
}
