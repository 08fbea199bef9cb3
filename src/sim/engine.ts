import type { ResolvedSimOptions } from './options.ts'

/** One request as the engine sees it: a prompt to prefill, then one `step` per generated token. */
export interface EngineJob {
  /** Prompt size, tokens; sets the prefill time. */
  readonly promptTokens: number
  /**
   * Called once when the job's prefill ends (its first token), then once per decode step it is
   * in the batch. Returns false to leave the batch (finished, failed or stalled).
   */
  step(): boolean
}

/** The batching scheduler of the simulated engine. */
export interface Engine {
  /** Queues a job for the prefill lane. */
  submit(job: EngineJob): void
  /** Removes a job wherever it is (queued, in prefill, in the batch); a no-op when gone. */
  cancel(job: EngineJob): void
  /** Jobs in the decode batch now. */
  running(): number
  /** The most jobs that were in the decode batch at once. */
  maxRunning(): number
  /** Cancels every timer; no job is stepped afterwards. */
  close(): void
}

type Timing = Pick<ResolvedSimOptions, 'prefillTokPerS' | 'decodeTokPerS' | 'batchSlowdown'>

/**
 * Creates the scheduler: one FIFO prefill lane (`promptTokens / prefillTokPerS` s per job), then
 * a global decode loop where every job in the batch gets one token per step and a step takes
 * `1000 / decodeTokPerS * (1 + batchSlowdown * (running - 1))` ms. A job that finishes prefill
 * joins at the next step boundary. Steps and prefills are scheduled against absolute target
 * times, so timer lateness does not accumulate.
 */
export function createEngine(timing: Timing, now: () => number = () => performance.now()): Engine {
  const prefillQueue: EngineJob[] = []
  let prefilling: EngineJob | null = null
  let prefillTimer: NodeJS.Timeout | null = null
  let prefillEndsAt = 0
  let laneFreeAt = 0

  const batch = new Set<EngineJob>()
  const joining = new Set<EngineJob>()
  let stepTimer: NodeJS.Timeout | null = null
  let stepEndsAt = 0
  let maxRunning = 0
  let closed = false

  function startPrefill(): void {
    if (closed || prefilling) return
    const job = prefillQueue.shift()
    if (!job) return
    prefilling = job
    // The lane starts the next prompt when the previous one was due to end, not when its timer fired.
    const startsAt = Math.max(laneFreeAt, now())
    prefillEndsAt = startsAt + (job.promptTokens / timing.prefillTokPerS) * 1000
    prefillTimer = setTimeout(endPrefill, Math.max(0, prefillEndsAt - now()))
  }

  function endPrefill(): void {
    const job = prefilling
    prefilling = null
    prefillTimer = null
    laneFreeAt = prefillEndsAt
    if (job && job.step()) join(job)
    startPrefill()
  }

  function join(job: EngineJob): void {
    joining.add(job)
    if (stepTimer) return
    admit()
    scheduleStep(now())
  }

  function admit(): void {
    for (const job of joining) batch.add(job)
    joining.clear()
    maxRunning = Math.max(maxRunning, batch.size)
  }

  function scheduleStep(startsAt: number): void {
    const stepMs = (1000 / timing.decodeTokPerS) * (1 + timing.batchSlowdown * (batch.size - 1))
    stepEndsAt = startsAt + stepMs
    stepTimer = setTimeout(endStep, Math.max(0, stepEndsAt - now()))
  }

  function endStep(): void {
    stepTimer = null
    for (const job of batch) {
      if (closed) return
      if (!job.step()) batch.delete(job)
    }
    admit()
    if (batch.size > 0 && !closed) scheduleStep(stepEndsAt)
  }

  return {
    submit(job) {
      if (closed) return
      prefillQueue.push(job)
      startPrefill()
    },
    cancel(job) {
      const queued = prefillQueue.indexOf(job)
      if (queued >= 0) prefillQueue.splice(queued, 1)
      batch.delete(job)
      joining.delete(job)
      if (prefilling === job) {
        if (prefillTimer) clearTimeout(prefillTimer)
        prefilling = null
        prefillTimer = null
        laneFreeAt = now()
        startPrefill()
      }
    },
    running: () => batch.size,
    maxRunning: () => maxRunning,
    close() {
      closed = true
      if (prefillTimer) clearTimeout(prefillTimer)
      if (stepTimer) clearTimeout(stepTimer)
      prefillTimer = null
      stepTimer = null
      prefilling = null
      prefillQueue.length = 0
      batch.clear()
      joining.clear()
    },
  }
}
