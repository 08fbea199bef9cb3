import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Runs `work` every `intervalMs` until `signal` aborts, on a fixed cadence (lateness does not
 * accumulate); when `work` overruns the interval the cadence restarts instead of running back
 * to back.
 */
export async function pollEvery(intervalMs: number, signal: AbortSignal, work: () => unknown): Promise<void> {
  let next = performance.now()
  while (!signal.aborted) {
    await work()
    next += intervalMs
    const wait = next - performance.now()
    if (wait <= 0) {
      next = performance.now()
      continue
    }
    await sleep(wait, undefined, { signal }).catch(() => undefined)
  }
}
