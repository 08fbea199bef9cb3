import { setTimeout as sleep } from 'node:timers/promises'
import { httpRequest } from '../http-request.ts'
import { sanitizeMessage } from '../errors.ts'
import type { EngineDrain, ErrorInfo } from '../schema/run.ts'
import type { EngineKind } from '../schema/telemetry.ts'
import { parseExposition } from './exposition.ts'
import { ENGINE_METRIC_NAMES, type EngineReading, metricLine, readEngineMetrics } from './prometheus.ts'

/** An engine's Prometheus endpoint; `kind` null when the names it exports are to be recognized from a scrape. */
export interface EngineMetricsRef {
  url: string
  kind: EngineKind | null
  /** Keep only series of this served model (`model_name` label). */
  modelName?: string
}

/** How long an engine may take to go back to idle after a cell that cancelled requests, ms. */
const DRAIN_BOUND_MS = 10_000
/**
 * SGLang's bound, ms: its scheduler refreshes its running, waiting and token-usage gauges only at
 * prefills, every `--decode-log-interval` decode steps and, once idle, every 30 s (`check_memory`
 * in scheduler.py), so an idle engine's gauges can lag 30 s behind it.
 */
const SGLANG_DRAIN_BOUND_MS = 35_000
/** The KV usage (a fraction, 1 = full) an engine may stay above its pre-cell level: one point. */
const DRAIN_KV_TOLERANCE = 0.01
/** Time between readings while waiting for the engine to settle, ms. */
const DRAIN_POLL_MS = 100
/** Per-scrape timeout, ms. */
const SCRAPE_TIMEOUT_MS = 2000

/** The bound of an engine kind, ms (see {@link DRAIN_BOUND_MS}). */
function drainBoundMs(kind: EngineKind | null): number {
  return kind === 'sglang' ? SGLANG_DRAIN_BOUND_MS : DRAIN_BOUND_MS
}

/** The engine kinds whose names a scrape is recognized by, in the order tried. */
const KINDS: readonly EngineKind[] = ['vllm', 'sglang', 'llama-server', 'trtllm']

type Scrape = { reading: EngineReading; kind: EngineKind } | { error: string }

/** One scrape of `ref`, reduced to the engine's figures; the kind recognized from its names when not given. */
async function scrape(ref: EngineMetricsRef, kind: EngineKind | null, signal: AbortSignal): Promise<Scrape> {
  let body: string
  try {
    const res = await httpRequest(ref.url, {
      headers: { accept: 'text/plain;version=0.0.4' },
      timeoutMs: SCRAPE_TIMEOUT_MS,
      signal,
    })
    body = res.text
    if (res.statusCode !== 200) return { error: sanitizeMessage(`${ref.url} answered HTTP ${res.statusCode}: ${body}`) }
  } catch (error) {
    return { error: sanitizeMessage(`${ref.url}: ${error instanceof Error ? error.message : String(error)}`) }
  }
  const exposition = parseExposition(body)
  const found = kind ?? KINDS.find((k) => metricLine(exposition, k) !== null) ?? null
  if (found === null) return { error: `${ref.url} exports none of the names servegate knows (vLLM, SGLang, llama.cpp, TensorRT-LLM)` }
  return { reading: readEngineMetrics(exposition, found, ref.modelName), kind: found }
}

/** What one reading after the cell says: settled, or what still holds. */
function unsettled(reading: EngineReading, kvBefore: number | null, tolerance: number): string[] {
  const held: string[] = []
  if (reading.running !== null && reading.running > 0) held.push(`${reading.running} running`)
  if (reading.waiting !== null && reading.waiting > 0) held.push(`${reading.waiting} waiting`)
  if (kvBefore !== null && reading.kvUsage !== null && reading.kvUsage > kvBefore + tolerance) {
    held.push(`KV usage ${reading.kvUsage} above its pre-cell ${kvBefore} (+${tolerance} allowed)`)
  }
  return held
}

/**
 * Whether an engine goes back to idle after a cell that cancelled requests: read once before the
 * cell's first request, then after its last until its running and waiting requests are 0 and its
 * KV usage is back within {@link DRAIN_KV_TOLERANCE} of the reading before, or the bound passes.
 * A figure the engine does not export is not judged (and said so); an endpoint that cannot be read
 * is recorded as not checked, never as a pass.
 * @example
 * const drain = new EngineDrainCheck({ url: 'http://127.0.0.1:8000/metrics', kind: 'vllm' }, null)
 * await drain.before()
 * // … the cell …
 * const result = await drain.after(signal) // { checked: true, passed: true, settledMs: 0, … }
 */
export class EngineDrainCheck {
  readonly #ref: EngineMetricsRef | null
  readonly #boundMs: number | null
  #kind: EngineKind | null
  #before: EngineReading | null = null
  #beforeError: string | null = null

  /**
   * @param ref the engine's Prometheus endpoint; null when it has none (an in-process engine)
   * @param boundMs how long to wait, ms; null for the kind's bound ({@link drainBoundMs})
   */
  constructor(ref: EngineMetricsRef | null, boundMs: number | null) {
    this.#ref = ref
    this.#boundMs = boundMs
    this.#kind = ref?.kind ?? null
  }

  /** Reads the engine before the cell's first request: its KV usage is the level it must go back to. */
  async before(signal: AbortSignal = new AbortController().signal): Promise<void> {
    if (this.#ref === null) return
    const got = await scrape(this.#ref, this.#kind, signal)
    if ('error' in got) {
      this.#beforeError = got.error
      return
    }
    this.#kind = got.kind
    this.#before = got.reading
  }

  /** Reads the engine after the cell until it settles or the bound passes; `signal` ends the wait early (not checked). */
  async after(signal: AbortSignal = new AbortController().signal): Promise<EngineDrain> {
    const boundMs = this.#boundMs ?? drainBoundMs(this.#kind)
    const base = { url: this.#ref?.url ?? null, boundMs, kvUsageTolerance: DRAIN_KV_TOLERANCE }
    const none = { settledMs: null, running: null, waiting: null, kvUsageBefore: null, kvUsageAfter: null, readings: 0 }
    if (this.#ref === null) {
      return { checked: false, ...base, ...none, passed: null, reason: 'the engine has no Prometheus endpoint (an in-process engine)' }
    }
    const kvBefore = this.#before?.kvUsage ?? null
    const start = performance.now()
    let last: EngineReading | null = null
    let lastError: string | null = null
    let readings = 0
    for (;;) {
      if (signal.aborted) {
        return {
          checked: false,
          ...base,
          ...none,
          kvUsageBefore: kvBefore,
          readings,
          passed: null,
          reason: 'the cell was cut short before the engine could be read',
        }
      }
      const got = await scrape(this.#ref, this.#kind, signal)
      const elapsed = performance.now() - start
      if ('error' in got) {
        lastError = got.error
        // An endpoint that had no metrics before the cell will not have them now: no waiting on it.
        if (this.#before === null && readings === 0) break
      } else {
        readings++
        this.#kind = got.kind
        last = got.reading
        if (unsettled(last, kvBefore, DRAIN_KV_TOLERANCE).length === 0) break
      }
      if (elapsed >= boundMs) break
      await sleep(Math.min(DRAIN_POLL_MS, boundMs - elapsed), undefined, { signal }).catch(() => undefined)
    }
    const settledAt = performance.now() - start
    if (last === null) {
      const why = lastError ?? this.#beforeError ?? 'no reading'
      return { checked: false, ...base, ...none, passed: null, reason: `the engine's /metrics could not be read after the cell: ${why}` }
    }
    const figures = { running: last.running, waiting: last.waiting, kvUsageBefore: kvBefore, kvUsageAfter: last.kvUsage, readings }
    const judged = this.#judged(last, kvBefore)
    if (judged.length === 0) {
      return {
        checked: false,
        ...base,
        ...figures,
        settledMs: null,
        passed: null,
        reason: `the engine exports none of running, waiting and KV usage (${this.#missing(last, kvBefore).join('; ')})`,
      }
    }
    const held = unsettled(last, kvBefore, DRAIN_KV_TOLERANCE)
    const unjudged = this.#missing(last, kvBefore)
    const also = unjudged.length === 0 ? '' : `; not judged: ${unjudged.join('; ')}`
    if (held.length === 0) {
      return {
        checked: true,
        ...base,
        ...figures,
        settledMs: settledAt,
        passed: true,
        reason: `back to idle ${Math.round(settledAt)} ms after the cell (${judged.join(', ')})${also}`,
      }
    }
    return {
      checked: true,
      ...base,
      ...figures,
      settledMs: null,
      passed: false,
      reason: `still ${held.join(', ')} ${Math.round(settledAt)} ms after the cell (bound ${boundMs} ms)${also}`,
    }
  }

  /** The figures the last reading lets servegate judge. */
  #judged(last: EngineReading, kvBefore: number | null): string[] {
    const judged: string[] = []
    if (last.running !== null) judged.push('running 0')
    if (last.waiting !== null) judged.push('waiting 0')
    if (last.kvUsage !== null && kvBefore !== null) judged.push(`KV usage within ${DRAIN_KV_TOLERANCE} of ${kvBefore}`)
    return judged
  }

  /** Why a figure was not judged. */
  #missing(last: EngineReading, kvBefore: number | null): string[] {
    const names = this.#kind === null ? null : ENGINE_METRIC_NAMES[this.#kind]
    const named = (source: (typeof ENGINE_METRIC_NAMES)[EngineKind]['running'] | undefined): string =>
      source === undefined ? 'its gauge' : source.name === null ? source.reason : `${source.name} is not exported`
    const missing: string[] = []
    if (last.running === null) missing.push(`running: ${named(names?.running)}`)
    if (last.waiting === null) missing.push(`waiting: ${named(names?.waiting)}`)
    if (last.kvUsage === null) missing.push(`KV usage: ${named(names?.kvUsage)}`)
    else if (kvBefore === null)
      missing.push(`KV usage: not read before the cell${this.#beforeError === null ? '' : ` (${this.#beforeError})`}`)
    return missing
  }
}

/** The cell failure of an engine that did not go back to idle: the figures, for people; null when it did or was not checked. */
export function drainFailure(drain: EngineDrain | null, cancelled: number): ErrorInfo | null {
  if (drain?.passed !== false) return null
  const message =
    `the engine did not go back to idle within ${drain.boundMs} ms after a cell that cancelled ${cancelled} request(s): ` +
    `running ${drain.running ?? 'not exported'}, waiting ${drain.waiting ?? 'not exported'}, ` +
    `KV usage ${drain.kvUsageAfter ?? 'not exported'} (before the cell ${drain.kvUsageBefore ?? 'unknown'}, ` +
    `+${drain.kvUsageTolerance} allowed); an aborted request's slot or KV was not released (${drain.url ?? 'no endpoint'})`
  return { code: 'ENGINE_NOT_DRAINED', message: sanitizeMessage(message), httpStatus: null, retryAfterS: null }
}
