/** Tiny typed run-record requests for the gate tests: only the fields a test sets differ from an idle request. */
import type { RequestRecord } from '../schema/run.ts'
import type { GateRecord } from './arms.ts'

type Ok = Extract<RequestRecord, { status: 'ok' }>

/** An ok request with every metric null except those given. */
export function okRequest(index: number, fields: Partial<Omit<Ok, 'status' | 'index'>> = {}): RequestRecord {
  return {
    status: 'ok',
    index,
    queueDelayMs: null,
    sendLagMs: null,
    startOffsetMs: null,
    ttftMs: null,
    timeToFirstOutputMs: null,
    e2eMs: null,
    generationMs: null,
    tpotMs: null,
    decodeTokPerS: null,
    effectivePrefillTokPerS: null,
    promptTokens: null,
    completionTokens: null,
    completionTokenSource: null,
    reasoningChunks: null,
    contentChunks: null,
    itlMs: null,
    finishReason: null,
    plannedPromptTokens: null,
    wireSha256: null,
    canary: null,
    outputAdherence: null,
    score: null,
    engineTimings: null,
    sendAttempts: 1,
    scheduledOffsetMs: null,
    ...fields,
  }
}

/** A failed request (excluded from every gate). */
export function failedRequest(index: number): RequestRecord {
  return {
    ...(okRequest(index) as Ok),
    status: 'failed',
    error: { code: 'REQUEST_DEADLINE', message: 'deadline', httpStatus: null, retryAfterS: null },
  } as RequestRecord
}

/** A launch whose i-th request has `field` = values[i]. */
export function launchOf(
  field: 'decodeTokPerS' | 'effectivePrefillTokPerS' | 'ttftMs' | 'tpotMs' | 'e2eMs' | 'timeToFirstOutputMs',
  values: readonly number[],
): GateRecord {
  return { requests: values.map((v, i) => okRequest(i, { [field]: v })) }
}

/** n values around `center` with a deterministic ±`spread` relative wiggle (no PRNG: the tests read as data). */
export function around(center: number, n: number, spread = 0.05, phase = 0): number[] {
  return Array.from({ length: n }, (_, i) => center * (1 + spread * Math.sin(1.7 * i + phase)))
}
