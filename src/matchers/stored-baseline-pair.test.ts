import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { failureOf } from '../../fixtures/matchers.ts'
import { hostFacts } from '../engines/manifest-facts.ts'
import { type StoredBaseline, storedBaseline } from '../record/stored-baseline.ts'
import { runCell } from '../runner/measure-cell.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { CellResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'
import { startSimServer } from '../sim/server.ts'
import { winGate } from '../gates/win.ts'

const manifest = (gpu = 'NVIDIA H100 80GB HBM3'): Manifest => ({
  engine: {
    kind: 'external',
    shape: 'http',
    version: { value: '0.11.0', source: 'GET /version', reason: null },
    commit: { value: null, source: null, reason: 'none' },
    argv: null,
    envNames: [],
    visibleDevices: null,
    tensorParallel: null,
  },
  model: { id: 'm', revision: null, fingerprint: { value: null, source: null, reason: 'no local path' } },
  gpus: { status: 'ok', devices: [{ index: 0, name: gpu, uuid: 'GPU-1', driverVersion: '550.54.15', memoryTotalMiB: 81559 }] },
  host: hostFacts(),
  harness: { version: '0.1.0', hash: 'h'.repeat(64) },
})

let dir: string
let main: StoredBaseline
let otherGpu: StoredBaseline
let candidate: CellResult

async function measure(decodeTokPerS: number): Promise<RunRecord> {
  const sim = await startSimServer({ model: 'm', prefillTokPerS: 40_000, decodeTokPerS, seed: 5 })
  try {
    const r = await runCell({ baseUrl: sim.url, model: 'm', concurrency: 2, requests: 24, maxTokens: 16, workload: { promptTokens: 32 } })
    return { ...r, manifest: manifest() }
  } finally {
    await sim.close()
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-stored-pair-'))
  // main's CI artifact, from the day before, at half the candidate's decode speed.
  const stored = { ...(await measure(200)), runId: 'run-main', startedAt: '2026-11-30T10:00:00.000Z' }
  await writeFile(join(dir, 'main.json'), JSON.stringify(stored))
  await writeFile(join(dir, 'a100.json'), JSON.stringify({ ...stored, manifest: manifest('NVIDIA A100-SXM4-80GB') }))
  main = await storedBaseline(join(dir, 'main.json'))
  otherGpu = await storedBaseline(join(dir, 'a100.json'))
  const record = await measure(400)
  candidate = { kind: 'cell', id: 'tiny c4', record, records: [record] }
}, 60_000)
afterAll(() => rm(dir, { recursive: true, force: true }))

describe('a cell judged against a stored baseline', () => {
  test('a matched stored baseline is a pair: toBeMatchedPair passes, and its message says where the baseline came from', () => {
    expect({ baseline: main, candidate }).toBeMatchedPair()
    expect(failureOf(() => expect({ baseline: main, candidate }).not.toBeMatchedPair())).toMatch(
      /\nBaseline: {2}the stored record \S+main\.json \(run-main, started 2026-11-30T10:00:00\.000Z\), not measured in this run$/,
    )
  })

  test('the decision carries the launch-noise floor and a warning naming the file, run and start', ({ task }) => {
    expect({ baseline: main, candidate }).toWinDecode({ margin: 0.2 })
    const recorded = task.meta.servegate?.decisions ?? []
    expect(recorded.map((d) => [d.cell, d.decision.gate, d.decision.outcome])).toEqual([['tiny c4', 'toWinDecode', 'pass']])
    const d = recorded[0]?.decision
    expect(d?.effect.method).toMatch(/launch noise 2% per launch added in quadrature/)
    expect(d?.warnings.at(-1)).toMatch(
      /^the baseline was not measured in this run: it is the stored record \S+main\.json \(run-main, started 2026-11-30T10:00:00\.000Z, /,
    )
    expect(d?.warnings.at(-1)).toMatch(
      /A stored baseline cannot be interleaved A B B A with the candidate, so only the launch-noise floor \(2%/,
    )
    // The matcher's own message says it too.
    expect(failureOf(() => expect({ baseline: main, candidate }).not.toWinDecode())).toMatch(
      /\nwarning: the baseline was not measured in this run: it is the stored record /,
    )
  })

  test('a stored baseline is one launch that cannot be repeated: an undecided win hints no repeats', ({ task }) => {
    expect({ baseline: main, candidate }).toWinDecode()
    const won = task.meta.servegate?.decisions[0]?.decision
    // 3% short of the measured ratio: within the 2% launch-noise floor, where only launches could decide.
    const margin = (won?.effect.estimate as number) * Math.exp(-0.03) - 1
    expect({ baseline: main, candidate }).not.toWinDecode({ margin })
    const d = task.meta.servegate?.decisions[1]?.decision
    expect(d?.outcome).toBe('inconclusive')
    expect(winGate({ baseline: [main.record], candidate: [candidate.record] }, { gate: 'toWinDecode', margin }).decideHint?.set).toEqual({
      repeats: expect.any(Number),
    })
    expect(d?.decideHint).toBeNull()
  })

  test('the floor is the one the matcher was given; an absolute latency bound reads no baseline, so no floor is claimed', ({ task }) => {
    expect({ baseline: main, candidate }).toHoldLatency({ metric: 'tpot', percentile: 50, notWorseThanPct: 5, launchNoise: 0.05 })
    expect({ baseline: main, candidate }).toHoldLatency({ metric: 'tpot', percentile: 50, atMostMs: 1000 })
    const [relative, absolute] = (task.meta.servegate?.decisions ?? []).map((d) => d.decision.warnings.at(-1))
    expect(relative).toMatch(/only the launch-noise floor \(5% per launch\) covers drift between the two launches$/)
    expect(absolute).toMatch(/^the baseline was not measured in this run: .*before the candidate\)$/)
  })

  test('a stored baseline that is not matched is refused with every mismatch, and .not cannot pass it', ({ task }) => {
    const refusal = failureOf(() => expect({ baseline: otherGpu, candidate }).toWinDecode())
    expect(refusal).toMatch(
      /^toWinDecode: the stored baseline \S+a100\.json \(run-main, started 2026-11-30T10:00:00\.000Z\) and the cell tiny c4 \(run-/,
    )
    expect(refusal).toMatch(/are not a matched pair, so no verdict is given:\n {2}- GPU model and memory: baseline \[\{"name":"NVIDIA A100/)
    expect(refusal).toMatch(/measure both arms in this run with pair\(\{ baseline, candidate \}\)\.$/)
    expect(() => expect({ baseline: otherGpu, candidate }).not.toWinDecode()).toThrow(/are not a matched pair/)
    expect(() => expect({ baseline: otherGpu, candidate }).toHoldLatency({ metric: 'ttft', notWorseThanPct: 10 })).toThrow(
      /^toHoldLatency: the stored baseline/,
    )
    expect(() => expect({ baseline: otherGpu, candidate }).toStayWithinAccuracyGap()).toThrow(/^toStayWithinAccuracyGap: the stored/)
    // No verdict reaches the evidence; the failed pair check does, on the cell.
    expect(task.meta.servegate?.decisions).toEqual([])
    expect(task.meta.servegate?.checks[0]).toMatchObject({ cell: 'tiny c4', check: 'toBeMatchedPair', passed: false })
    expect(task.meta.servegate?.checks[0]?.findings[0]).toMatch(/^GPU model and memory: /)
  })

  test('a wrong shape is a TypeError naming the matcher and what to pass', () => {
    const pending = storedBaseline(join(dir, 'main.json'))
    expect(() => expect({ baseline: pending, candidate }).toWinDecode()).toThrow(
      'toWinDecode: expected { baseline: await storedBaseline(path), candidate: await cell(…) }; ' +
        'its baseline is a Promise (add await), not a stored baseline',
    )
    expect(() => expect({ baseline: main, candidate: candidate.record }).toBeMatchedPair()).toThrow(
      /^toBeMatchedPair: expected .*; its candidate is an object that is not a servegate result, not a measured cell$/,
    )
    const repeated = { ...candidate, records: [candidate.record, candidate.record] }
    expect(() => expect({ baseline: main, candidate: repeated }).toWinDecode()).toThrow(
      /^toWinDecode: the stored baseline \S+main\.json is one launch and the cell tiny c4 has 2; one launch against several/,
    )
  })
})
