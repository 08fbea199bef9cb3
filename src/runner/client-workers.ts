import { availableParallelism } from 'node:os'

/** The most worker threads a cell may ask for. */
export const MAX_CLIENT_WORKERS = 64
/** The most `'auto'` starts: past this, one more thread costs more memory than it frees in time. */
const AUTO_CLIENT_WORKERS_CAP = 16
/** Streams one worker takes before `'auto'` adds another. */
const STREAMS_PER_WORKER = 32

/**
 * How many worker threads a cell's client streams on. An explicit count is taken as given.
 * `'auto'` leaves the engine its cores and the cell's thread one: where that leaves none (one
 * core or none free), streaming stays in the cell's thread (0); otherwise one worker per
 * {@link STREAMS_PER_WORKER} streams, at least one, at most the cores left and
 * {@link AUTO_CLIENT_WORKERS_CAP}.
 * @param streams the most requests in flight (concurrency, or the open loop's cap; null: no cap)
 * @param engineCores the cores the engine takes on this machine (`engineCpuCores`)
 * @example clientWorkerCount('auto', 1024, 10, 64) // 16
 * @example clientWorkerCount('auto', 256, 1, 2)    // 0: the engine's core and the cell's thread take both
 */
export function clientWorkerCount(
  requested: number | 'auto',
  streams: number | null,
  engineCores: number,
  cores: number = availableParallelism(),
): number {
  if (requested !== 'auto') return requested
  const free = cores - engineCores
  if (free <= 1) return 0
  const wanted = streams === null ? Infinity : Math.ceil(streams / STREAMS_PER_WORKER)
  return Math.max(1, Math.min(free - 1, AUTO_CLIENT_WORKERS_CAP, wanted))
}
