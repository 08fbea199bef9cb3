import type { ResolvedSLO } from '../schema/load.ts'
import {
  type CellMetrics,
  type Distribution,
  PERCENTILE_METHOD,
  P99_MIN_SAMPLES,
  REQUEST_METRIC_NAMES,
  type RequestRecord,
} from '../schema/run.ts'
import { type ItlPacked, unpackGaps, unpackGapsInto } from '../schema/itl-packed.ts'
import { ServegateError } from '../errors.ts'
import { wilsonInterval } from '../stats/wilson.ts'
import { CachedPromptTally, cachedPromptMetrics } from './cached-prompt.ts'
import { distribution, p99IsDescriptive } from './distribution.ts'
import { emptyMisses, type GoodCount, goodputOf, tallyGood } from './goodput.ts'
import { ReplyDraftTally } from './spec-decode.ts'

type Distributions = CellMetrics['distributions']
type DistributionName = keyof Distributions & keyof RequestRecord

/** The per-request numbers a distribution is drawn from (ITL is pooled from every request's gaps). */
const PER_REQUEST: readonly DistributionName[] = [...REQUEST_METRIC_NAMES, 'queueDelayMs', 'sendLagMs']

/** Failed requests counted by error code, the run record's `failures`. */
export function countFailures(records: Iterable<RequestRecord>): Record<string, number> {
  const failures: Record<string, number> = {}
  for (const r of records) if (r.status === 'failed') failures[r.error.code] = (failures[r.error.code] ?? 0) + 1
  return failures
}

/**
 * A cell's figures taken one request at a time, so a cell whose records are on disk (spilled)
 * is summarized from a single pass over them: only numbers are kept, never the records.
 * Fed in plan order it gives exactly what `computeCellMetrics` gives over the same records.
 */
export class CellTally {
  completed = 0
  failed = 0
  /** Requests the cell's `cancel` plan aborted: neither completed nor failed, in no distribution. */
  cancelled = 0
  readonly failures: Record<string, number> = {}
  /** Every measured request's send lag, ok or failed (the harness's own lateness). */
  readonly sendLags: number[] = []
  private readonly columns = new Map<DistributionName, number[]>(PER_REQUEST.map((name) => [name, []]))
  /**
   * Every ok request's gaps, as its record holds them (an array, or packed when read back from a
   * spill), pooled into one array only when the metrics are taken: a cell of 512 × 1000 tokens
   * never grows a pooled array a push at a time (its copies and their garbage were 10 MB).
   */
  private readonly itl: Array<readonly number[] | ItlPacked> = []
  private itlCount = 0
  private readonly sources = { usage: 0, 'client-count': 0 }
  private totalCompletionTokens = 0
  private totalPromptTokens = 0
  private canaries = { samples: 0, passed: 0 }
  private control = { controlled: 0, observable: 0, exact: 0 }
  private scores = { samples: 0, correct: 0 }
  private readonly slo: ResolvedSLO | null
  private readonly good: GoodCount | null
  private readonly cached = new CachedPromptTally()
  private readonly drafts = new ReplyDraftTally()
  /** Conversations: per turn, its counts and its ok requests' TTFT and prompt tokens. */
  private readonly turns = new Map<
    number,
    { completed: number; failed: number; ttftMs: number[]; promptTokens: number[]; cached: CachedPromptTally }
  >()

  constructor(slo: ResolvedSLO | null = null) {
    this.slo = slo
    this.good = slo === null ? null : { samples: 0, good: 0, missed: emptyMisses() }
  }

  add(r: RequestRecord): void {
    const packed = r.itlMs === null ? r.itlPacked : null
    // Packed gaps are checked whole once, here; an ITL objective reads that same decoding as an array.
    const decoded = packed === null ? null : this.#checked(packed, r.index, this.good !== null)
    if (r.sendLagMs !== null) this.sendLags.push(r.sendLagMs)
    if (r.canary !== null) {
      this.canaries.samples++
      if (r.canary.passed) this.canaries.passed++
    }
    if (r.outputAdherence !== null) {
      this.control.controlled++
      if (r.outputAdherence !== 'unobservable') this.control.observable++
      if (r.outputAdherence === 'exact') this.control.exact++
    }
    if (r.score !== null) {
      this.scores.samples++
      if (r.score.correct) this.scores.correct++
    }
    if (this.good !== null && this.slo !== null) tallyGood(this.good, decoded === null ? r : { ...r, itlMs: decoded }, this.slo)
    if (r.turn !== null) this.#addTurn(r, r.turn)
    if (r.status === 'cancelled') {
      this.cancelled++
      return
    }
    if (r.status === 'failed') {
      this.failed++
      this.failures[r.error.code] = (this.failures[r.error.code] ?? 0) + 1
      return
    }
    this.completed++
    for (const [name, values] of this.columns) {
      const v = r[name]
      if (typeof v === 'number') values.push(v)
    }
    const gaps = r.itlMs ?? packed
    if (gaps !== null) {
      this.itl.push(gaps)
      this.itlCount += 'count' in gaps ? gaps.count : gaps.length
    }
    if (r.completionTokenSource !== null) this.sources[r.completionTokenSource]++
    this.drafts.add(r.engineTimings)
    this.totalCompletionTokens += r.completionTokens ?? 0
    this.totalPromptTokens += r.promptTokens ?? 0
    this.cached.add(r)
  }

  /**
   * Packed gaps, checked whole before they are kept: decoded into an array when `asArray`, else
   * only checked (null). @throws ServegateError FILE_INVALID naming the field
   */
  #checked(packed: ItlPacked, index: number, asArray: boolean): number[] | null {
    const read = asArray ? unpackGaps(packed) : unpackGapsInto(packed, null)
    if (typeof read === 'object' && !Array.isArray(read)) {
      throw new ServegateError('FILE_INVALID', `request ${index}: itlPacked.${read.field}: ${read.message}; the record is corrupt`)
    }
    return Array.isArray(read) ? read : null
  }

  /** Every ok request's gaps in one array, in the order they were added. */
  #pooledItl(): Float64Array {
    const pooled = new Float64Array(this.itlCount)
    let at = 0
    for (const gaps of this.itl) {
      if ('count' in gaps) {
        unpackGapsInto(gaps, pooled, at)
        at += gaps.count
      } else {
        pooled.set(gaps, at)
        at += gaps.length
      }
    }
    return pooled
  }

  #addTurn(r: RequestRecord, turn: number): void {
    let t = this.turns.get(turn)
    if (t === undefined) {
      t = { completed: 0, failed: 0, ttftMs: [], promptTokens: [], cached: new CachedPromptTally() }
      this.turns.set(turn, t)
    }
    if (r.status === 'cancelled') return
    if (r.status === 'failed') {
      t.failed++
      return
    }
    t.completed++
    t.cached.add(r)
    if (r.ttftMs !== null) t.ttftMs.push(r.ttftMs)
    if (r.promptTokens !== null) t.promptTokens.push(r.promptTokens)
  }

  /** Per turn, in turn order; null when no request belonged to a conversation. */
  #byTurn(): CellMetrics['byTurn'] {
    if (this.turns.size === 0) return null
    // Once any request of the cell reported cached tokens, a turn none of whose requests did cached none (vLLM leaves out a 0).
    const known = this.cached.figures().cachedPromptTokens !== null
    return [...this.turns.entries()]
      .sort(([a], [b]) => a - b)
      .map(([turn, t]) => {
        const cached = t.cached.figures()
        return {
          turn,
          completed: t.completed,
          failed: t.failed,
          ttftMs: distribution(t.ttftMs),
          promptTokens: distribution(t.promptTokens),
          cachedPromptShare: cached.share ?? (known && cached.promptTokens > 0 ? 0 : null),
        }
      })
  }

  /**
   * The cell-level metrics over what was added; throughput and rates divide by `wallClockMs`,
   * and are null when it is (an import whose source recorded no duration).
   */
  metrics(wallClockMs: number | null): CellMetrics {
    const column = (name: DistributionName): Distribution => distribution(this.columns.get(name) ?? [])
    const distributions = {
      ttftMs: column('ttftMs'),
      timeToFirstOutputMs: column('timeToFirstOutputMs'),
      e2eMs: column('e2eMs'),
      generationMs: column('generationMs'),
      tpotMs: column('tpotMs'),
      decodeTokPerS: column('decodeTokPerS'),
      effectivePrefillTokPerS: column('effectivePrefillTokPerS'),
      promptTokens: column('promptTokens'),
      completionTokens: column('completionTokens'),
      itlMs: distribution(this.#pooledItl()),
      queueDelayMs: column('queueDelayMs'),
      sendLagMs: column('sendLagMs'),
    } satisfies Distributions
    const seconds = wallClockMs === null ? 0 : wallClockMs / 1000
    const ok = this.completed
    const { controlled, observable, exact } = this.control
    const wilson = wilsonInterval(this.scores.correct, this.scores.samples)
    return {
      percentileMethod: PERCENTILE_METHOD,
      p99MinSamples: P99_MIN_SAMPLES,
      p99DescriptiveOnly: REQUEST_METRIC_NAMES.filter((name) => {
        const d = distributions[name]
        return d.samples > 0 && p99IsDescriptive(d)
      }),
      distributions,
      totalCompletionTokens: this.totalCompletionTokens,
      totalPromptTokens: this.totalPromptTokens,
      ...cachedPromptMetrics(this.cached.figures()),
      completionTokenSources: { ...this.sources },
      outputThroughputTokPerS: seconds > 0 && ok > 0 ? this.totalCompletionTokens / seconds : null,
      requestRateReqPerS: seconds > 0 && ok > 0 ? ok / seconds : null,
      wallClockMs,
      canaries: this.canaries.samples === 0 ? null : { ...this.canaries },
      outputControl:
        controlled === 0
          ? null
          : { samples: observable, exact, rate: observable > 0 ? exact / observable : null, unobservable: controlled - observable },
      accuracy:
        this.scores.samples === 0
          ? null
          : {
              samples: this.scores.samples,
              correct: this.scores.correct,
              rate: this.scores.correct / this.scores.samples,
              wilson95Low: wilson.low,
              wilson95High: wilson.high,
            },
      goodput: this.good === null || this.slo === null ? null : goodputOf(this.good, wallClockMs, this.slo),
      openLoop: null,
      byTurn: this.#byTurn(),
      specDecode: this.drafts.metrics(),
    }
  }
}

/**
 * Cell-level metrics over the ok requests only (failed ones keep their record but enter no
 * distribution). Throughput and request rate divide by the cell's wall clock. With an SLO,
 * goodput is judged over every measured request (a failed one is never good).
 */
export function computeCellMetrics(
  records: Iterable<RequestRecord>,
  wallClockMs: number | null,
  slo: ResolvedSLO | null = null,
): CellMetrics {
  const tally = new CellTally(slo)
  for (const r of records) tally.add(r)
  return tally.metrics(wallClockMs)
}
