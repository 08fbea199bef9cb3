import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { okRequest } from '../../fixtures/gate-fixture.ts'
import type { RequestRecord } from '../schema/run.ts'
import { pair } from './cell-declarations.ts'
import { engine } from './engine-handles.ts'
import { resolveStopEarly, StagedPair } from '../runner/staged-pair.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'servegate-sequential-'))
const fakeAt = (decodeTokPerS: number) =>
  engine.vllm({
    name: `fake-${decodeTokPerS}`,
    executable: join(FAKES, 'vllm'),
    model: { id: 'fake/m' },
    env: { FAKE_ENGINE_DECODE_TOK_PER_S: String(decodeTokPerS) },
    logDir: join(dir, 'logs'),
  })

const slow = fakeAt(100)
const fast = fakeAt(200)
const plan = { concurrency: 4, requests: 48, maxTokens: 8, workload: { promptTokens: 32 } }
const stopEarly = { looks: [16, 32], gates: [{ gate: 'toWinDecode' as const, margin: 0.05 }] }
const clearWin = pair({ baseline: slow, candidate: fast, ...plan, stopEarly })
// The candidate's true gain sits on the gate's threshold (+5%): a look decides only when noise
// carries the estimate a whole interval past it. A candidate equal to its baseline would be
// rightly judged "no 5% win" at an early look once the machine's noise is small.
const atThreshold = pair({ baseline: slow, candidate: fakeAt(105), ...plan, stopEarly })

describe('a sequential pair measured in stages', () => {
  test('a plain 2× decode win stops both arms at the first look, and the matcher reads the same design', async () => {
    const p = await clearWin
    for (const record of [...p.baseline, ...p.candidate]) {
      expect(record.requests.map((r) => r.index)).toEqual([...Array(16).keys()])
      expect(record.plan.sequential).toMatchObject({ looks: [16, 32, 48], plannedRequests: 48, stoppedAt: 16 })
      expect(record.plan.sequential?.reason).toMatch(/every stopping gate decided at look 1 of 3 \(16 requests\): toWinDecode pass/)
      // The planned hash covers the 16 requests that were due, so the wire bytes still match it.
      expect(record.plan.workload.wireMatchesPlan).toBe(true)
    }
    expect(p.baseline[0]?.plan.workload.requestStreamSha256).toBe(p.candidate[0]?.plan.workload.requestStreamSha256)
    expect(p).toWinDecode({ margin: 0.05 })
    expect(p).toBeMatchedPair()
  })

  test('with the gain on the threshold no look decides, so every stage runs', async () => {
    const p = await atThreshold
    for (const record of [...p.baseline, ...p.candidate]) {
      expect(record.requests).toHaveLength(48)
      expect(record.plan.sequential).toMatchObject({ stoppedAt: 48, reason: expect.stringMatching(/ran every stage/) })
    }
  })

  test('bad designs are refused, naming the field', () => {
    expect(() => pair({ baseline: slow, candidate: fast, ...plan, stopEarly: { looks: [4], gates: [{ gate: 'toWinDecode' }] } })).toThrow(
      /stopEarly[\s\S]*looks/,
    )
    expect(() =>
      pair({ baseline: slow, candidate: fast, ...plan, stopEarly: { looks: [16], gates: [{ gate: 'toWinDecode', looks: [16] }] } }),
    ).toThrow(/set `looks` on stopEarly, not on its gates/)
    expect(() => pair({ baseline: slow, candidate: fast, ...plan, repeats: 2, stopEarly })).toThrow(/stopEarly needs one launch per arm/)
    expect(() =>
      pair({ baseline: slow, candidate: fast, ...plan, stopEarly: { looks: [16], gates: [{ gate: 'toWinThroughput' }] } }),
    ).toThrow(/toWinThroughput judges the cell's aggregate output tok\/s, one figure per cell, which has no looks/)
    expect(resolveStopEarly({ looks: [16], gates: [{ gate: 'toWinThroughput', metric: 'throughputTokPerS' }] }).gates).toHaveLength(1)
  })
})

describe('StagedPair', () => {
  /** Drives both arms through the coordinator as cells would, logging who ran which stage. */
  async function drive(
    staged: StagedPair,
    values: { baseline: number; candidate: number },
    breakAt: { arm: 'baseline' | 'candidate'; stage: number } | null = null,
  ) {
    const log: string[] = []
    const arm = async (which: 'baseline' | 'candidate') => {
      const stages = staged.stagesFor(which)
      const records: RequestRecord[] = []
      for (let stage = 0; stage < stages.ends.length; stage++) {
        if (!(await stages.turn(stage))) break
        log.push(`${which[0]}${stage}`)
        await new Promise((resolve) => setTimeout(resolve, which === 'baseline' ? 3 : 1))
        const from = records.length
        for (let i = from; i < (stages.ends[stage] as number); i++)
          records.push(okRequest(i, { decodeTokPerS: values[which] * (1 + 0.05 * Math.sin(i)) }))
        stages.done(stage, records, breakAt?.arm === which && breakAt.stage === stage)
      }
      staged.leave(which)
    }
    await Promise.all([arm('baseline'), arm('candidate')])
    return { log, plan: staged.plan() }
  }

  test('arms take turns A B B A and stop together at the deciding look', async () => {
    const none = await drive(new StagedPair({ looks: [8, 16, 24], gates: [{ gate: 'toWinDecode', margin: 0.05 }] }, 32), {
      baseline: 50,
      candidate: 50,
    })
    expect(none.log).toEqual(['b0', 'c0', 'c1', 'b1', 'b2', 'c2', 'c3', 'b3'])
    expect(none.plan).toMatchObject({ looks: [8, 16, 24, 32], stoppedAt: 32 })
    const win = await drive(new StagedPair({ looks: [8, 16, 24], gates: [{ gate: 'toWinDecode', margin: 0.05 }] }, 32), {
      baseline: 50,
      candidate: 80,
    })
    expect(win.log).toEqual(['b0', 'c0'])
    expect(win.plan).toMatchObject({ stoppedAt: 8 })
  })

  test('an arm that cannot go on stops the pair after the last stage both finished', async () => {
    const { log, plan } = await drive(
      new StagedPair({ looks: [8, 16], gates: [{ gate: 'toWinDecode' }] }, 32),
      { baseline: 50, candidate: 50 },
      { arm: 'candidate', stage: 1 },
    )
    expect(log).toEqual(['b0', 'c0', 'c1'])
    expect(plan).toMatchObject({ stoppedAt: 8, reason: expect.stringMatching(/the candidate arm cannot go on after stage 2/) })
  })
})

test('stopEarly needs the closed loop', () => {
  expect(() => pair({ baseline: slow, candidate: fast, ...plan, arrival: { kind: 'poisson', ratePerS: 4 }, stopEarly })).toThrow(
    /stopEarly needs the closed loop/,
  )
})
