import type { ServegateError } from '../errors.ts'
import { httpRequest } from '../http-request.ts'
import type { PhaseListener } from '../schema/progress.ts'

/** What a readiness wait watches besides its paths: its deadline, why to stop early, and what to say at the deadline. */
export interface ReadinessWatch {
  /** The deadline, ms from the first poll. */
  readonly timeoutMs: number
  /** The log the `waiting` phase points people to. */
  readonly logPath: string
  /** Why the wait is over before readiness (the process exited), or null to keep polling. */
  stopped(): ServegateError | null
  /** The error at the deadline, for the path that did not answer 200. */
  timedOut(path: string): ServegateError
  /** Settles when something changes (the process exits), so a poll does not sleep through it. */
  readonly wake?: Promise<unknown>
  /** The interruption's error, when `signal` aborts. */
  interrupted(): ServegateError
}

/**
 * Polls each readiness path at `origin` until it answers 200 (all of them, in order), the watch
 * says stop, `signal` aborts, or the deadline passes; tells `onPhase` how long it has waited at
 * each poll. What a launched process and a Kubernetes deployment both wait on.
 * @throws ServegateError from the watch: stopped, timed out, interrupted
 */
export async function pollReadiness(
  origin: string,
  paths: readonly string[],
  watch: ReadinessWatch,
  signal?: AbortSignal,
  onPhase?: PhaseListener,
): Promise<void> {
  const started = performance.now()
  const deadline = started + watch.timeoutMs
  for (const path of paths) {
    for (;;) {
      onPhase?.({ phase: 'waiting', elapsedMs: performance.now() - started, timeoutMs: watch.timeoutMs, logPath: watch.logPath })
      // First: Ctrl-C kills the engine too, and its exit then is ours, not a crash.
      if (signal?.aborted) throw watch.interrupted()
      const stopped = watch.stopped()
      if (stopped !== null) throw stopped
      if (performance.now() > deadline) throw watch.timedOut(path)
      try {
        const res = await httpRequest(`${origin}${path}`, { signal: AbortSignal.timeout(2000) })
        if (res.statusCode === 200) break
      } catch {
        // Not listening yet.
      }
      await Promise.race([new Promise((r) => setTimeout(r, 200)), ...(watch.wake === undefined ? [] : [watch.wake])])
    }
  }
}
