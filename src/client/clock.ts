/**
 * `process.hrtime` in ms minus `performance.now()` in this thread: both read the same monotonic
 * source (libuv's hrtime), so the difference is this thread's `performance.now()` origin. Taken
 * as the closest of a few paired reads, it is exact to well under a microsecond.
 */
const HRTIME_OFFSET_MS = ((): number => {
  let best = Infinity
  let offset = 0
  for (let i = 0; i < 16; i++) {
    const before = performance.now()
    const [s, ns] = process.hrtime()
    const after = performance.now()
    if (after - before < best) {
      best = after - before
      offset = s * 1e3 + ns / 1e6 - (before + after) / 2
    }
  }
  return offset
})()

/**
 * The one monotonic clock every client timestamp is read from, in ms on `process.hrtime`'s scale,
 * which is process-wide: a stamp taken in a worker thread and one taken in the cell's thread
 * compare. (`performance.now()` alone counts from each thread's own start.) It reads
 * `performance.now()` and adds this thread's origin, so a read allocates nothing (`process.hrtime()`
 * makes an array each call, and a client stamps every chunk).
 * @example
 * const sentAt = monoMs()
 * // … in any thread …
 * const gapMs = monoMs() - sentAt
 */
export function monoMs(): number {
  return performance.now() + HRTIME_OFFSET_MS
}
