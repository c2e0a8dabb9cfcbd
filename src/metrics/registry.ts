/**
 * A small metrics registry: counters, gauges (set directly or computed at scrape time) and
 * histograms, rendered in the Prometheus text format. Features get it as `ctx.metrics` and register
 * what they measure; asking again for a name returns the same metric, so two modules can share one.
 */
import { CONTENT_TYPE, escapeHelp, formatLabels, formatValue, isLabelName, isMetricName } from './exposition.ts'

export { CONTENT_TYPE }

export type Labels = Record<string, string | number | boolean>

export interface MetricOptions {
  name: string
  help: string
  labelNames?: readonly string[]
}

/** A value produced at scrape time, for gauges that read their figure from elsewhere. */
export interface Sample {
  labels?: Labels
  value: number
}

type Kind = 'counter' | 'gauge' | 'histogram'

abstract class Metric<V> {
  readonly labelNames: readonly string[]
  protected readonly series = new Map<string, { values: string[]; data: V }>()

  constructor(
    readonly kind: Kind,
    readonly name: string,
    readonly help: string,
    labelNames: readonly string[] = [],
  ) {
    if (!isMetricName(name)) throw new Error(`invalid metric name "${name}"`)
    for (const l of labelNames) if (!isLabelName(l) || (kind === 'histogram' && l === 'le')) throw new Error(`invalid label name "${l}" on ${name}`)
    this.labelNames = [...labelNames]
  }

  /** Label values in declaration order; a missing or unknown label is a programming error. */
  protected values(labels: Labels = {}): string[] {
    const names = this.labelNames
    // every request updates a few series: one pass, no intermediate arrays
    let given = 0
    for (const _ in labels) given++
    const out = new Array<string>(names.length)
    // as many labels as names, and every name among them: exactly the declared labels
    for (let i = 0; i < names.length && given === names.length; i++) {
      const v = labels[names[i]]
      if (v === undefined) break
      out[i] = String(v)
      if (i === names.length - 1) return out
    }
    if (names.length === 0 && given === 0) return out
    throw new Error(`${this.name} takes labels [${names.join(', ')}], got [${Object.keys(labels).join(', ')}]`)
  }

  protected entry(labels: Labels | undefined, init: () => V): V {
    const values = this.values(labels)
    const key = values.join('\u0000')
    let e = this.series.get(key)
    if (!e) this.series.set(key, (e = { values, data: init() }))
    return e.data
  }

  header(): string {
    return `# HELP ${this.name} ${escapeHelp(this.help)}\n# TYPE ${this.name} ${this.kind}\n`
  }

  abstract render(): string
}

export class Counter extends Metric<{ value: number }> {
  private readonly collect?: () => number

  /** `collect` reads a total kept elsewhere (e.g. CPU seconds) at scrape time instead of `inc`. */
  constructor(opts: MetricOptions & { collect?: () => number }) {
    super('counter', opts.name, opts.help, opts.labelNames)
    if (!opts.name.endsWith('_total')) throw new Error(`counter ${opts.name} must end in _total`)
    if (opts.collect && this.labelNames.length > 0) throw new Error(`counter ${opts.name}: collect works without labels only`)
    this.collect = opts.collect
    if (this.labelNames.length === 0) this.entry(undefined, () => ({ value: 0 }))
  }

  inc(labels?: Labels, by = 1): void {
    if (!(by >= 0)) throw new Error(`${this.name} can only increase`)
    this.entry(labels, () => ({ value: 0 })).value += by
  }

  get(labels?: Labels): number {
    return this.series.get(this.values(labels).join('\u0000'))?.data.value ?? 0
  }

  render(): string {
    if (this.collect) this.entry(undefined, () => ({ value: 0 })).value = this.collect()
    let out = this.header()
    for (const { values, data } of this.series.values()) out += `${this.name}${formatLabels(this.labelNames, values)} ${formatValue(data.value)}\n`
    return out
  }
}

export class Gauge extends Metric<{ value: number }> {
  private readonly collect?: () => number | Sample[]

  constructor(opts: MetricOptions & { collect?: () => number | Sample[] }) {
    super('gauge', opts.name, opts.help, opts.labelNames)
    this.collect = opts.collect
  }

  set(value: number, labels?: Labels): void {
    this.entry(labels, () => ({ value: 0 })).value = value
  }

  inc(labels?: Labels, by = 1): void {
    this.entry(labels, () => ({ value: 0 })).value += by
  }

  dec(labels?: Labels, by = 1): void {
    this.entry(labels, () => ({ value: 0 })).value -= by
  }

  render(): string {
    if (this.collect) {
      const got = this.collect()
      const samples = typeof got === 'number' ? [{ value: got }] : got
      this.series.clear() // a series the source no longer reports disappears
      for (const s of samples) this.set(s.value, s.labels)
    }
    let out = this.header()
    for (const { values, data } of this.series.values()) out += `${this.name}${formatLabels(this.labelNames, values)} ${formatValue(data.value)}\n`
    return out
  }
}

/** Latency buckets in seconds, from a cached read (1 ms) to a slow upload (10 s). */
export const DEFAULT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

export class Histogram extends Metric<{ counts: number[]; sum: number; count: number }> {
  readonly buckets: number[]

  constructor(opts: MetricOptions & { buckets?: number[] }) {
    super('histogram', opts.name, opts.help, opts.labelNames)
    this.buckets = [...(opts.buckets ?? DEFAULT_BUCKETS)].sort((a, b) => a - b)
  }

  observe(value: number, labels?: Labels): void {
    const h = this.entry(labels, () => ({ counts: this.buckets.map(() => 0), sum: 0, count: 0 }))
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]) h.counts[i]++
    h.sum += value
    h.count++
  }

  render(): string {
    let out = this.header()
    const withLe = [...this.labelNames, 'le']
    for (const { values, data } of this.series.values()) {
      for (let i = 0; i < this.buckets.length; i++) {
        out += `${this.name}_bucket${formatLabels(withLe, [...values, formatValue(this.buckets[i])])} ${data.counts[i]}\n`
      }
      out += `${this.name}_bucket${formatLabels(withLe, [...values, '+Inf'])} ${data.count}\n`
      out += `${this.name}_sum${formatLabels(this.labelNames, values)} ${formatValue(data.sum)}\n`
      out += `${this.name}_count${formatLabels(this.labelNames, values)} ${data.count}\n`
    }
    return out
  }
}

type AnyMetric = Counter | Gauge | Histogram

export class MetricsRegistry {
  private readonly metrics = new Map<string, AnyMetric>()

  /** `onCollectError` hears about a gauge whose collect function threw; that gauge is left out. */
  constructor(private readonly onCollectError: (name: string, err: unknown) => void = () => {}) {}

  counter(opts: MetricOptions & { collect?: () => number }): Counter {
    return this.getOrAdd(opts, 'counter', () => new Counter(opts)) as Counter
  }

  gauge(opts: MetricOptions & { collect?: () => number | Sample[] }): Gauge {
    return this.getOrAdd(opts, 'gauge', () => new Gauge(opts)) as Gauge
  }

  histogram(opts: MetricOptions & { buckets?: number[] }): Histogram {
    return this.getOrAdd(opts, 'histogram', () => new Histogram(opts)) as Histogram
  }

  private getOrAdd(opts: MetricOptions, kind: Kind, make: () => AnyMetric): AnyMetric {
    const existing = this.metrics.get(opts.name)
    if (existing) {
      const same = existing.kind === kind && existing.labelNames.join() === (opts.labelNames ?? []).join()
      if (!same) throw new Error(`metric ${opts.name} is already registered as a ${existing.kind} with labels [${existing.labelNames.join(', ')}]`)
      return existing
    }
    const metric = make()
    this.metrics.set(opts.name, metric)
    return metric
  }

  /** Every metric in the text format, in registration order. */
  expose(): string {
    let out = ''
    for (const metric of this.metrics.values()) {
      try {
        out += metric.render()
      } catch (err) {
        this.onCollectError(metric.name, err)
      }
    }
    return out
  }
}
