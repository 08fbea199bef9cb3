import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { emptyObservation, type StreamObservation } from '../client/stream.ts'
import { digestSent } from '../client/sent-digest.ts'
import { RequestSpill } from '../record/request-spill.ts'
import type { CellPhase, CellProgress } from '../schema/progress.ts'
import { prepareWorkload, type PreparedWorkload } from '../workload/prepare.ts'
import { WireHash } from './body-feed.ts'
import type { Slot } from './dispatch.ts'
import { RequestLedger } from './request-ledger.ts'
import { HELD_BYTES, UsageCrossCheck } from './usage-check.ts'

const workload = (requests: number): Promise<PreparedWorkload> =>
  prepareWorkload({ promptTokens: 16 }, { api: 'chat', maxTokens: 4, requests, warmupRequests: 0 }, null)

/** Request `index` of a stage, sent at `sentAt` and ended at `endAt`; `failed` ends it with an error. */
function slot(index: number, sentAt: number, endAt: number, failed = false): Slot {
  const obs: StreamObservation = {
    ...emptyObservation(sentAt),
    firstOutputAt: endAt,
    firstContentAt: endAt,
    endAt,
    outputChunkAt: Float64Array.of(endAt),
    contentChunks: 1,
    usageCompletionTokens: 1,
    finishReason: 'stop',
    httpStatus: 200,
    content: 'x',
    sent: digestSent([Buffer.from(`{"model":"m","i":${index}}`)], 'm'),
    error: failed ? { code: 'HTTP_STATUS', message: 'HTTP 500', httpStatus: 500, retryAfterS: null } : null,
  }
  return { index, readyAt: sentAt, slotAt: sentAt, scheduledOffsetMs: null, obs }
}

describe('RequestLedger', () => {
  test('keeps each ended request in plan order, counts it, tells progress and phase, and hashes the wire in plan order', async () => {
    const progress: CellProgress[] = []
    const phases: CellPhase[] = []
    const ledger = new RequestLedger(await workload(3), 3, { onProgress: (p) => progress.push(p), onPhase: (p) => phases.push(p) }, 1000)
    ledger.beginStage(null)
    const ended = [slot(2, 1010, 1050), slot(0, 1000, 1030, true), slot(1, 1005, 1040)]
    for (const s of ended) ledger.end(s)
    ledger.endStage(3)

    expect(ledger.records.map((r) => [r.index, r.status])).toEqual([
      [0, 'failed'],
      [1, 'ok'],
      [2, 'ok'],
    ])
    expect(ledger.records[1]?.startOffsetMs).toBe(5)
    expect(progress.map(({ done, ok, failed, total }) => [done, ok, failed, total])).toEqual([
      [1, 1, 0, 3],
      [2, 1, 1, 3],
      [3, 2, 1, 3],
    ])
    // One phase at the stage's start, one after each request.
    expect(phases.map((p) => (p.phase === 'requests' ? [p.done, p.stage] : p.phase))).toEqual([
      [0, null],
      [1, null],
      [2, null],
      [3, null],
    ])
    const inOrder = new WireHash()
    for (const s of [...ended].sort((a, b) => a.index - b.index)) inOrder.add(s.index, s.obs.sent)
    expect(ledger.wireDigest()).toBe(inOrder.digest())
    // From the first send (1000) to the last end (1050).
    expect(ledger.busyMs).toBe(50)
    expect(ledger.sent).toBe(3)
    expect(ledger.unsent).toBe(0)
    const tally = await ledger.tally(null)
    expect([tally.completed, tally.failed]).toEqual([2, 1])
  })

  test('stages number their requests on from the last, sum their busy spans without the idle between, and count what never ended as unsent', async () => {
    const phases: CellPhase[] = []
    const ledger = new RequestLedger(await workload(6), 6, { onPhase: (p) => phases.push(p) }, 0)
    ledger.beginStage({ index: 1, of: 2 })
    ledger.end(slot(0, 0, 10))
    ledger.end(slot(1, 2, 20))
    ledger.endStage(2)
    // An hour idle, then the second stage: its slots count from 0 again.
    ledger.beginStage({ index: 2, of: 2 })
    ledger.end(slot(1, 3_600_000, 3_600_030))
    ledger.end(slot(0, 3_600_000, 3_600_005))
    ledger.endStage(6)

    expect(ledger.records.map((r) => r.index)).toEqual([0, 1, 2, 3])
    expect(ledger.busyMs).toBe(20 + 30)
    expect(ledger.sent).toBe(6)
    expect(ledger.done).toBe(4)
    expect(ledger.unsent).toBe(2)
    expect(phases.filter((p) => p.phase === 'requests').map((p) => p.phase === 'requests' && p.stage?.index)).toEqual([1, 1, 1, 2, 2, 2])
  })

  test('a request judges its reply by the plan it was sent with, and drops that plan once it ends', async () => {
    const w = await workload(2)
    const ledger = new RequestLedger(w, 2, {}, 0)
    ledger.beginStage(null)
    ledger.sending(0, { ...w.planned(0), plannedPromptTokens: 77 })
    ledger.end(slot(0, 0, 1))
    ledger.end(slot(1, 0, 1))
    ledger.endStage(2)
    expect(ledger.records.map((r) => r.plannedPromptTokens)).toEqual([77, w.planned(1).plannedPromptTokens])
  })

  test('holds replies for the tokenizer pass only while they and what they keep alive fit its budget', async () => {
    const tokenizer = { description: 'words', countChat: async () => 0, countText: async (text: string) => text.split(' ').length }
    const usage = await UsageCrossCheck.start({ maxTokensPerChunk: 16, retokenize: true }, async () => ({ warning: null, tokenizer }))
    const requests = 40
    const ledger = new RequestLedger(await workload(requests), requests, { usage }, 0)
    ledger.beginStage(null)
    // Each reply keeps 1 MiB of chunk times alive while it is held.
    const chunkTimes = 128 * 1024
    for (let i = 0; i < requests; i++) {
      const s = slot(i, i, i + 10)
      s.obs.outputChunkAt = new Float64Array(chunkTimes).fill(i + 10)
      s.obs.contentChunks = chunkTimes
      s.obs.usageCompletionTokens = chunkTimes
      s.obs.streamedText = 'x '.repeat(chunkTimes).trim()
      ledger.end(s)
    }
    await ledger.settleUsage()
    ledger.endStage(requests)
    const byTokenizer = ledger.records.filter((r) => r.usageRule === 'tokenizer').length
    const perReply = chunkTimes * 8 + 2048 + 2 * chunkTimes - 1
    expect(byTokenizer).toBe(Math.floor(HELD_BYTES / perReply))
    expect(ledger.records.filter((r) => r.usageRule === 'chunk-bound')).toHaveLength(requests - byTokenizer)
  })

  test('spilled, it keeps no record in memory and tallies every one read back from disk', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'servegate-ledger-'))
    try {
      const spill = await RequestSpill.create(join(dir, 'cell.requests.jsonl'))
      const ledger = new RequestLedger(await workload(4), 4, { spill }, 0)
      ledger.beginStage(null)
      for (const i of [3, 1, 0, 2]) ledger.end(slot(i, i, i + 10, i === 1))
      ledger.endStage(4)
      expect(ledger.records).toEqual([])
      const tally = await ledger.tally(null)
      expect([tally.completed, tally.failed]).toEqual([3, 1])
      await spill.close()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
