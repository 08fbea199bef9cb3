import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { failureOf } from '../../fixtures/matchers.ts'
import { testManifest } from '../../fixtures/manifest.ts'
import { runCell } from '../runner/measure-cell.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { PairResult } from '../schema/results.ts'
import type { RunRecord } from '../schema/run.ts'
import type { SimServer } from '../sim/server.ts'
import { startSimServer } from '../sim/server.ts'

let sim: SimServer
let base: RunRecord

/** The shared test manifest, with its model facts and GPU name overridden. */
const manifest = (over: Partial<Manifest['model']> = {}, gpu = 'NVIDIA H100 80GB HBM3'): Manifest => {
  const m = testManifest()
  const devices = m.gpus.status === 'ok' ? m.gpus.devices.map((d) => ({ ...d, name: gpu })) : []
  return { ...m, model: { ...m.model, ...over }, gpus: { status: 'ok', devices } }
}

beforeAll(async () => {
  sim = await startSimServer({ model: 'm', decodeTokPerS: 2000 })
  base = await runCell({ baseUrl: sim.url, model: 'm', requests: 4, maxTokens: 4, workload: { promptTokens: 32, canaries: true, seed: 5 } })
})
afterAll(() => sim.close())

const withManifest = (r: RunRecord, m: Manifest = manifest()): RunRecord => ({ ...r, manifest: m })
const pairOf = (b: RunRecord, c: RunRecord): PairResult => ({
  kind: 'pair',
  id: 'p',
  baseline: [b],
  candidate: [c],
  launchOrder: ['baseline', 'candidate'],
})

describe('toBeMatchedPair', () => {
  test('passes for the same plan on both arms, and its .not fails with the reason', () => {
    const p = pairOf(withManifest(base), withManifest(base))
    expect(p).toBeMatchedPair()
    expect(failureOf(() => expect(p).not.toBeMatchedPair())).toMatchInlineSnapshot(`
      "expect(result).not.toBeMatchedPair()

      Expected:  the pair to differ in some fairness fact
      Received:  a matched pair (1+1 launches)
      GPU UUIDs: baseline GPU-1; candidate GPU-1 (reported, not required)"
    `)
  })

  test('reports each arm’s draft acceptance beside the facts, never as one of them', () => {
    const spec = {
      source: 'prometheus-counters' as const,
      drafts: 100,
      draftTokens: 300,
      acceptedTokens: 210,
      acceptanceRate: 0.7,
      meanAcceptanceLength: 3.1,
      acceptanceRateByPosition: [0.9, 0.7, 0.5],
      note: null,
    }
    const drafting = { ...withManifest(base), metrics: { ...base.metrics, specDecode: spec } }
    const p = pairOf(withManifest(base), drafting)
    expect(p).toBeMatchedPair()
    expect(failureOf(() => expect(p).not.toBeMatchedPair())).toContain(
      'Draft acceptance: baseline none reported; candidate 70.0% of draft tokens accepted, mean acceptance length 3.10 ' +
        '(prometheus-counters) (reported, not required)',
    )
    expect(failureOf(() => expect(pairOf(withManifest(base), withManifest(base))).not.toBeMatchedPair())).not.toContain('Draft')
  })

  test('cancellations are a fact: the same share, delay and seed on both arms', () => {
    const cancel = { share: 0.5, afterMs: 100, seed: 5, indices: [0, 2] }
    const b = { ...withManifest(base), plan: { ...base.plan, cancel } }
    const c = { ...withManifest(base), plan: { ...base.plan, cancel: { ...cancel, afterMs: 200 } } }
    expect(pairOf(b, b)).toBeMatchedPair()
    expect(failureOf(() => expect(pairOf(b, c)).toBeMatchedPair())).toMatch(
      /- cancellations: baseline \{"share":0\.5,"afterMs":100,"seed":5,"chosen":2\} ≠ \{"share":0\.5,"afterMs":200,"seed":5,"chosen":2\}/,
    )
  })

  test('names every mismatch: model revision, GPU, wire bytes', () => {
    const other = { ...withManifest(base, manifest({ revision: 'def' }, 'NVIDIA A100-SXM4-80GB')) }
    other.plan = { ...other.plan, workload: { ...other.plan.workload, wireMatchesPlan: false } }
    const p = pairOf(withManifest(base), other)
    expect(p).not.toBeMatchedPair()
    expect(failureOf(() => expect(p).toBeMatchedPair())).toMatchInlineSnapshot(`
      "expect(result).toBeMatchedPair()

      Expected:  every fairness fact equal on both arms
      Received:  3 mismatches
      GPU UUIDs: baseline GPU-1; candidate GPU-1 (reported, not required)

      - model revision: baseline abc ≠ def (1/2 launches as the baseline)
      - GPU model and memory: baseline [{"name":"NVIDIA H100 80GB HBM3","memoryTotalMiB":81559}] ≠ [{"name":"NVIDIA A100-SXM4-80GB","memoryTotalMiB":81559}] (1/2 launches as the baseline)
      - candidate: the bytes written to the socket differ from the planned request stream"
    `)
  })

  test('a failed cell is never a matched pair', () => {
    const failed = {
      ...withManifest(base),
      cellFailure: {
        code: 'ENGINE_EXITED' as const,
        message: 'engine vllm exited mid-cell with code 1',
        httpStatus: null,
        retryAfterS: null,
      },
    }
    expect(failureOf(() => expect(pairOf(withManifest(base), failed)).toBeMatchedPair())).toMatch(
      /a cell failed, so nothing can be compared: candidate: ENGINE_EXITED: engine vllm exited mid-cell with code 1/,
    )
  })

  test('a wrong argument is a TypeError naming the matcher', () => {
    expect(() => expect({ kind: 'cell' }).toBeMatchedPair()).toThrow(
      new TypeError(
        'toBeMatchedPair: expected a measured pair (await pair({ baseline, candidate, … })), received an object of kind "cell"',
      ),
    )
  })
})

describe('toPassCanaries', () => {
  test('passes when every reply carried its own marker; .not fails', () => {
    const c = { kind: 'cell' as const, id: 'c', record: base, records: [base] }
    expect(c).toPassCanaries()
    expect(failureOf(() => expect(c).not.toPassCanaries())).toMatchInlineSnapshot(`
      "expect(result).not.toPassCanaries()

      Expected: some canary to fail
      Received: 4/4 canaries passed"
    `)
  })

  test('fails naming the request whose reply crossed streams', () => {
    const crossed: RunRecord = {
      ...base,
      requests: base.requests.map((r, i) =>
        i === 2 && r.canary !== null
          ? { ...r, canary: { ...r.canary, passed: false, reason: "the reply contains another request's marker (SGREQ-5-00003)" } }
          : r,
      ),
      metrics: { ...base.metrics, canaries: { samples: 4, passed: 3 } },
    }
    const c = { kind: 'cell' as const, id: 'c', record: crossed, records: [crossed] }
    expect(failureOf(() => expect(c).toPassCanaries())).toMatchInlineSnapshot(`
      "expect(result).toPassCanaries()

      Expected: every reply to begin with its own marker and hold no other
      Received: 3/4 canaries passed

      - cell request 2: the reply contains another request's marker (SGREQ-5-00003)"
    `)
  })
})

describe('toReachConcurrency', () => {
  test('fails with the reason when the cell has no engine metrics', () => {
    const c = { kind: 'cell' as const, id: 'c', record: base, records: [base] }
    expect(c).not.toReachConcurrency()
    expect(failureOf(() => expect(c).toReachConcurrency())).toMatchInlineSnapshot(`
      "expect(result).toReachConcurrency()

      Expected: the engine to run the requested concurrency
      Received: no engine occupancy

      - cell: no telemetry was recorded (the cell did not run on an engine servegate launched)"
    `)
  })
})
