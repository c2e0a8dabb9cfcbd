/**
 * Padmé padding (Nikitin et al., "Reducing Metadata Leakage from Encrypted Files and Communication with
 * PURBs", 2019): a length L is rounded up so that only its top ~log2(log2 L) bits remain, which leaks
 * O(log log L) bits of the length at a cost of at most 12 % more bytes. Below `minimum` every length
 * becomes `minimum`.
 */
export function paddedLength(length: number, minimum: number): number {
  if (length <= minimum) return minimum
  const e = Math.floor(Math.log2(length))
  const s = Math.floor(Math.log2(e)) + 1
  const lastBits = e - s
  const mask = 2 ** lastBits - 1
  // (L + mask) & ~mask, in arithmetic that stays exact above 2^31
  return Math.floor((length + mask) / 2 ** lastBits) * 2 ** lastBits
}
