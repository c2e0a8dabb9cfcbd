/**
 * A store as the storage hands it out for use outside a transaction: the methods named in `inTx` run
 * as a unit of work of their own (through `run`, on the store `pick` finds in it), every other method
 * is called on `store` through `read` (with the method, bound to the store, and its arguments), which
 * maps the driver's errors (and may retry).
 */
export function topLevelStore<S extends object, T>(
  store: S,
  inTx: readonly string[],
  run: (fn: (tx: T) => Promise<unknown>) => Promise<unknown>,
  pick: (tx: T) => S,
  read: (method: (...args: unknown[]) => unknown, args: unknown[]) => unknown,
): S {
  const out: Record<string, unknown> = {}
  const proto = Object.getPrototypeOf(store) as Record<string, unknown>
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === 'constructor' || typeof proto[name] !== 'function') continue
    if (inTx.includes(name)) {
      out[name] = (...args: unknown[]) => run((tx) => (pick(tx) as Record<string, (...a: unknown[]) => Promise<unknown>>)[name](...args))
    } else {
      const method = (proto[name] as (...a: unknown[]) => unknown).bind(store)
      out[name] = (...args: unknown[]) => read(method, args)
    }
  }
  return out as S
}
