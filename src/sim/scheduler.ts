import type { ResolvedSimOptions } from './sim-options.ts'

/** One request as the engine sees it: a prompt to prefill, then one `step` per generated token. */
export interface EngineJob {
  /** Prompt size, tokens; sets the prefill time. */
  readonly promptTokens: number
  /** KV tokens the job reserves while admitted: its prompt plus the output it will generate. */
  readonly reservedTokens: number
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
  /** Jobs waiting for admission (a seat in the batch or KV room); 0 without a capacity limit. */
  queued(): number
  /** The most jobs that waited for admission at once. */
  maxQueued(): number
  /** KV tokens reserved by admitted jobs now. */
  reservedTokens(): number
  /** Cancels every timer; no job is stepped afterwards. */
  close(): void
}

/** Observers of the scheduler's events (the sim's SGLang gauges refresh on them). */
export interface EngineHooks {
  /** A job finished its prefill and is about to join the batch, which now holds `running` jobs. */
  onPrefill?(running: number): void
  /** Decode step number `step` (from 1) ended; `batchSize` jobs ran in it. */
  onStep?(step: number, batchSize: number): void
}

type Timing = Pick<ResolvedSimOptions, 'prefillTokPerS' | 'decodeTokPerS' | 'batchSlowdown' | 'maxBatch' | 'kvBudgetTokens'>

/**
 * Creates the scheduler: one FIFO prefill lane (`promptTokens / prefillTokPerS` s per job), then
 * a global decode loop where every job in the batch gets one token per step and a step takes
 * `1000 / decodeTokPerS * (1 + batchSlowdown * (running - 1))` ms. A job that finishes prefill
 * joins at the next step boundary. Steps and prefills are scheduled against absolute target
 * times, so timer lateness does not accumulate.
 *
 * Capacity (`maxBatch`, `kvBudgetTokens`): a job holds a seat and reserves its prompt plus output
 * tokens of KV from admission until it leaves the batch. Jobs beyond the seats or the budget wait
 * in a FIFO queue (the head blocks the rest) and are admitted at step boundaries, as an
 * iteration-level scheduler (vLLM's) admits them; an idle engine admits at once. A seat is then
 * held for exactly one step per output token while the prefills of one boundary fit in a step
 * (see `simCapacity`), which makes the saturation rate computable.
 */
export function createEngine(timing: Timing, now: () => number = () => performance.now(), hooks: EngineHooks = {}): Engine {
  const prefillQueue: EngineJob[] = []
  let prefilling: EngineJob | null = null
  let prefillTimer: NodeJS.Timeout | null = null
  let prefillEndsAt = 0
  let laneFreeAt = 0

  const batch = new Set<EngineJob>()
  const joining = new Set<EngineJob>()
  let stepTimer: NodeJS.Timeout | null = null
  let steps = 0
  let stepEndsAt = 0
  let maxRunning = 0
  let closed = false

  const limited = timing.maxBatch !== null || timing.kvBudgetTokens !== null
  const waiting: EngineJob[] = []
  const seated = new Set<EngineJob>()
  let reserved = 0
  let maxQueued = 0

  /** Admits waiting jobs, head first, while a seat and KV room are free; they queue for prefill. */
  function admitWaiting(): void {
    while (!closed && waiting.length > 0) {
      const job = waiting[0] as EngineJob
      if (timing.maxBatch !== null && seated.size >= timing.maxBatch) break
      if (timing.kvBudgetTokens !== null && reserved + job.reservedTokens > timing.kvBudgetTokens) break
      waiting.shift()
      seated.add(job)
      reserved += job.reservedTokens
      prefillQueue.push(job)
    }
    startPrefill()
  }

  /** Frees a job's seat and KV; an idle engine admits the next at once, a stepping one at its next boundary. */
  function release(job: EngineJob): void {
    if (!seated.delete(job)) return
    reserved -= job.reservedTokens
    if (stepTimer === null) admitWaiting()
  }

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
    if (job) hooks.onPrefill?.(batch.size)
    if (job && job.step()) join(job)
    else if (job) release(job)
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
    steps++
    hooks.onStep?.(steps, batch.size)
    for (const job of batch) {
      if (closed) return
      if (!job.step()) {
        batch.delete(job)
        release(job)
      }
    }
    admit()
    // The step boundary: seats freed by this step go to waiting jobs now.
    if (limited) admitWaiting()
    if (batch.size > 0 && !closed) scheduleStep(stepEndsAt)
  }

  return {
    submit(job) {
      if (closed) return
      if (!limited) {
        prefillQueue.push(job)
        startPrefill()
        return
      }
      waiting.push(job)
      // An idle engine has no step boundary to wait for.
      if (stepTimer === null) admitWaiting()
      maxQueued = Math.max(maxQueued, waiting.length)
    },
    cancel(job) {
      const inWaiting = waiting.indexOf(job)
      if (inWaiting >= 0) waiting.splice(inWaiting, 1)
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
      release(job)
    },
    running: () => batch.size,
    maxRunning: () => maxRunning,
    queued: () => waiting.length,
    maxQueued: () => maxQueued,
    reservedTokens: () => reserved,
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
      waiting.length = 0
      seated.clear()
      reserved = 0
    },
  }
}
