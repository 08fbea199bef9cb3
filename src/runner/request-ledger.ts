import { monoMs } from '../client/clock.ts'
import type { SentDigest } from '../client/sent-digest.ts'
import { CellTally } from '../metrics/cell-metrics.ts'
import type { RequestSpill } from '../record/request-spill.ts'
import type { CellProgress, PhaseListener } from '../schema/progress.ts'
import type { RequestRecord } from '../schema/run.ts'
import type { PlannedRequest, PreparedWorkload } from '../workload/prepare.ts'
import { WireHash } from './body-feed.ts'
import type { ResolvedRunCellOptions } from './cell-options.ts'
import type { Slot } from './dispatch.ts'
import { requestRecord } from './run-record.ts'
import { tokenizerVerdict, UsageCrossCheck } from './usage-check.ts'

/** Where a ledger's records go and whom it tells as they end. */
export interface LedgerOutlets {
  /** Keep each record on disk, not in memory; `records` then stays empty. */
  spill?: RequestSpill | null
  /** Called after each request ends. */
  onProgress?: ((progress: CellProgress) => void) | undefined
  /** Told the `requests` phase at each stage's start and after each request. */
  onPhase?: PhaseListener | undefined
  /** Judges each reply's reported usage; without it, the chunk bound at its default alone. */
  usage?: UsageCrossCheck
  /** Whether the cell's `cancel` plan aborted request `index` (asked once, as it ends); none is cancelled without it. */
  cancelled?: ((index: number) => boolean) | undefined
  /** Told what each request wrote (a shard's part of the merged wire hash), as it ends. */
  onWire?: ((index: number, sent: SentDigest | null) => void) | undefined
}

/** Which stage of how many a staged cell is in; null for a cell measured in one go. */
export type StageOf = { index: number; of: number } | null

/**
 * What a slot held for the tokenizer pass keeps alive until then, bytes: its chunk times and the
 * observation's other objects and strings. Counted against the pass's budget, so a long cell stops
 * holding replies once they would take that much: a 100 req/s soak had held every one, its RSS
 * growing 2.4 kB a request.
 */
function heldSlotBytes(slot: Slot): number {
  return slot.obs.outputChunkAt.byteLength + HELD_SLOT_OVERHEAD_BYTES
}

/**
 * A held slot's objects beside its chunk times, bytes: the soak's heap snapshots held about 1.6 kB
 * a reply of 16 chunks, its RSS grew 2.4 kB.
 */
const HELD_SLOT_OVERHEAD_BYTES = 2048

/**
 * The measured requests of one cell, kept as each ends: its record is made then (the
 * observation, with its chunk times and content, is dropped) and kept in memory or spilled to
 * disk; what it wrote enters the wire hash in plan order; it counts as ok or failed toward the
 * progress reported (a request the `cancel` plan aborted as neither). Requests run in stages
 * (one for a cell measured in one go), each a block of the plan in order; a stage's busy span,
 * from its first send to its last end, adds to the cell's wall clock.
 * @example
 * const ledger = new RequestLedger(workload, 10, { onProgress })
 * ledger.beginStage(null)
 * ledger.sending(0, planned) // …sent; then, as it ends:
 * ledger.end(slot)
 * ledger.endStage(10)
 * const tally = await ledger.tally(null)
 */
export class RequestLedger {
  /** Monotonic ms the measured requests start from: records' offsets and the progress's elapsed time count from it. */
  readonly cellStart: number
  readonly #workload: PreparedWorkload
  readonly #total: number
  readonly #spill: RequestSpill | null
  readonly #onProgress: ((progress: CellProgress) => void) | undefined
  readonly #onPhase: PhaseListener | undefined
  readonly #records: RequestRecord[] = []
  readonly #wire = new WireHash()
  // Each request's plan waits here only while it is in flight.
  readonly #inFlight = new Map<number, PlannedRequest>()
  readonly #usage: UsageCrossCheck
  readonly #cancelled: ((index: number) => boolean) | undefined
  readonly #onWire: ((index: number, sent: SentDigest | null) => void) | undefined
  // Ended replies whose usage waits for the tokenizer pass, with where their provisional record
  // lies in `#records` (-1 when spilled): their records are made again then.
  readonly #awaitingCount = new Map<number, { slot: Slot; planned: PlannedRequest; at: number }>()
  #ok = 0
  #failed = 0
  #cancelledCount = 0
  #done = 0
  #sent = 0
  #stage: StageOf = null
  #firstSend = Infinity
  #lastEnd = -Infinity
  #busyMs = 0

  /**
   * @param total the requests planned, as progress reports them
   * @param cellStart monotonic ms; now by default
   */
  constructor(workload: PreparedWorkload, total: number, outlets: LedgerOutlets = {}, cellStart = monoMs()) {
    this.#workload = workload
    this.#total = total
    this.#spill = outlets.spill ?? null
    this.#onProgress = outlets.onProgress
    this.#onPhase = outlets.onPhase
    this.#usage = outlets.usage ?? UsageCrossCheck.chunkBound({ maxTokensPerChunk: 16, retokenize: false })
    this.#cancelled = outlets.cancelled
    this.#onWire = outlets.onWire
    this.cellStart = cellStart
  }

  /** Requests due so far: every one of the stages ended. The next stage's first request is this one. */
  get sent(): number {
    return this.#sent
  }

  /** Requests ended, ok, failed or cancelled. */
  get done(): number {
    return this.#done
  }

  /** Requests the cell's `cancel` plan aborted so far. */
  get cancelled(): number {
    return this.#cancelledCount
  }

  /** Requests due that never ended: the cell was cut short (an abort, the engine gone). */
  get unsent(): number {
    return this.#sent - this.#done
  }

  /** Every record kept so far, in plan order after each stage; empty when spilled. The ledger's own array: read it, don't change it. */
  get records(): RequestRecord[] {
    return this.#records
  }

  /** The stages' busy spans summed, ms: the cell's wall clock (idle time between stages counts not). */
  get busyMs(): number {
    return this.#busyMs
  }

  /** A stage starts at request `sent`; tells the phase. */
  beginStage(stage: StageOf): void {
    this.#stage = stage
    this.#firstSend = Infinity
    this.#lastEnd = -Infinity
    this.#reportPhase()
  }

  /** Request `index` (in plan order) goes out with this plan; the plan is kept until it ends. */
  sending(index: number, planned: PlannedRequest): void {
    this.#inFlight.set(index, planned)
  }

  /** A request of the current stage ended; `slot.index` counts from the stage's first request. */
  end(slot: Slot): void {
    const index = this.#sent + slot.index
    const { obs } = slot
    this.#firstSend = Math.min(this.#firstSend, obs.sentAt)
    this.#lastEnd = Math.max(this.#lastEnd, obs.endAt ?? obs.sentAt)
    const planned = this.#inFlight.get(index) ?? this.#workload.planned(index)
    this.#inFlight.delete(index)
    // Aborted by the plan, not by the caller or a deadline: neither ok nor failed.
    const cancelled = (this.#cancelled?.(index) ?? false) && obs.error?.code === 'REQUEST_ABORTED'
    const verdict = obs.error === null ? this.#usage.screen(obs) : { rule: null, retokenized: null, problem: null }
    const held = verdict.rule !== null && verdict.problem === null && this.#usage.hold(index, obs.streamedText, heldSlotBytes(slot))
    obs.streamedText = null
    // Kept at once, judged on the chunk bound, so a spill holds it even if the cell is killed;
    // a held reply's record is made again once the tokenizer has counted it.
    const at = this.#keep(requestRecord({ ...slot, index }, this.cellStart, planned, this.#workload, verdict, cancelled))
    if (held) this.#awaitingCount.set(index, { slot: { ...slot, index }, planned, at })
    this.#wire.add(index, obs.sent)
    this.#onWire?.(index, obs.sent)
    if (cancelled) this.#cancelledCount++
    else if (obs.error === null && verdict.problem === null) this.#ok++
    else this.#failed++
    this.#done++
    this.#onProgress?.({ done: this.#done, total: this.#total, ok: this.#ok, failed: this.#failed, elapsedMs: monoMs() - this.cellStart })
    this.#reportPhase()
  }

  /**
   * After a stage's requests, before its records are read: the tokenizer counts each held reply's
   * streamed text once, and their records are made with that verdict.
   */
  async settleUsage(signal?: AbortSignal): Promise<void> {
    if (this.#awaitingCount.size === 0) return
    // An aborted cell sends nothing more, to the tokenizer neither: its held replies keep the chunk bound's verdict.
    const counts = signal?.aborted === true ? new Map<number, number | null>() : await this.#usage.settle()
    for (const [index, { slot, planned, at }] of this.#awaitingCount) {
      const verdict = tokenizerVerdict(slot.obs.usageCompletionTokens as number, counts.get(index) ?? null)
      if (verdict.problem !== null) {
        this.#ok--
        this.#failed++
      }
      const record = requestRecord(slot, this.cellStart, planned, this.#workload, verdict)
      if (this.#spill === null) this.#records[at] = record
      else this.#spill.replace(record)
    }
    this.#awaitingCount.clear()
  }

  /** Keeps a record in memory or in the spill; where it lies in `#records`, -1 when spilled. */
  #keep(record: RequestRecord): number {
    if (this.#spill !== null) {
      this.#spill.add(record)
      return -1
    }
    this.#records.push(record)
    return this.#records.length - 1
  }

  /** The stage ended with request `end` due (those not sent count as unsent); records go back in plan order. */
  endStage(end: number): void {
    this.#busyMs += Math.max(0, this.#lastEnd - this.#firstSend)
    this.#sent = end
    this.#records.sort((a, b) => a.index - b.index)
  }

  /** The hash of what went on the wire, over every request from the first up to the first one still missing. */
  wireDigest(): string {
    return this.#wire.digest()
  }

  /** The cell's figures from one pass over every request, in plan order (read back from disk when spilled). */
  async tally(slo: ResolvedRunCellOptions['slo']): Promise<CellTally> {
    const tally = new CellTally(slo)
    if (this.#spill === null) for (const r of this.#records) tally.add(r)
    else for await (const r of this.#spill.inOrder(false)) tally.add(r)
    return tally
  }

  #reportPhase(): void {
    this.#onPhase?.({
      phase: 'requests',
      done: this.#done,
      total: this.#total,
      ok: this.#ok,
      failed: this.#failed,
      elapsedMs: monoMs() - this.cellStart,
      stage: this.#stage,
    })
  }
}
