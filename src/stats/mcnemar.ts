/**
 * The exact (conditional, binomial) McNemar test for paired proportions, e.g. the accuracy
 * of two arms on the same questions. Only discordant questions carry information: `b` right
 * on the first arm only, `c` right on the second only. Under the null each discordant question
 * is a fair coin, so the two-sided p-value is min(1, 2·P(X ≤ min(b, c))) with X ~ Bin(b + c, ½).
 * Summed in log space, so it stays exact to rounding for any count.
 * @returns the two-sided p-value; 1 when there are no discordant pairs
 * @example mcnemarExact(1, 7) // 0.0703125 (Fagerland et al. 2013, BMC Med Res Methodol 13:91)
 */
export function mcnemarExact(b: number, c: number): number {
  for (const [name, value] of [
    ['b', b],
    ['c', c],
  ] as const) {
    if (!Number.isInteger(value) || value < 0) {
      throw new RangeError(`mcnemarExact: ${name} must be a non-negative integer, got ${value}`)
    }
  }
  const n = b + c
  if (n === 0) return 1
  const k = Math.min(b, c)
  // log C(n, i) by the recurrence C(n, i) = C(n, i − 1)·(n − i + 1)/i; terms grow with i ≤ n/2.
  const logTerms = new Array<number>(k + 1)
  logTerms[0] = 0
  for (let i = 1; i <= k; i++) logTerms[i] = (logTerms[i - 1] as number) + Math.log(n - i + 1) - Math.log(i)
  const max = logTerms[k] as number
  let scaled = 0
  for (const term of logTerms) scaled += Math.exp(term - max)
  const logTail = max + Math.log(scaled) - n * Math.LN2
  return Math.min(1, 2 * Math.exp(logTail))
}

/**
 * The mid-p version of the exact McNemar test: the exact p-value less the probability of the
 * observed split. Fagerland et al. (2013) recommend it over the exact test, which is
 * conservative (its actual false-positive rate is well below the nominal level).
 * @example mcnemarMidP(1, 7) // 0.0390625
 */
export function mcnemarMidP(b: number, c: number): number {
  const exact = mcnemarExact(b, c)
  const n = b + c
  if (n === 0) return 1
  const k = Math.min(b, c)
  let logPoint = -n * Math.LN2
  for (let i = 1; i <= k; i++) logPoint += Math.log(n - i + 1) - Math.log(i)
  // b = c: the two tails share the observed point; 1 − ½·P(X = k).
  return b === c ? 1 - 0.5 * Math.exp(logPoint) : exact - Math.exp(logPoint)
}
