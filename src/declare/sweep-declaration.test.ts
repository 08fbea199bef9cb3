import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { CapacitySearch } from '../schema/capacity-record.ts'
import { capacity } from './capacity-declaration.ts'
import { engine } from './engine-handles.ts'
import { sweep } from './sweep-declaration.ts'
import { declaredCell } from '../worker/cell-registry.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'servegate-load-spec-'))
const pids = join(dir, 'pids.txt')
const launches = (): number => readFileSync(pids, 'utf8').split('\n').filter(Boolean).length / 3

// A fake vLLM whose sim takes `--max-num-seqs` seats, 10 ms steps, no batching slowdown: with
// 8-token replies it saturates at seats / 80 ms, 25 req/s for 2 seats and 100 for 8.
const vllm = (seats: number) =>
  engine.vllm({
    name: `seats${seats}`,
    executable: join(FAKES, 'vllm'),
    model: { id: 'fake/m' },
    extraArgs: ['--max-num-seqs', String(seats)],
    env: { FAKE_ENGINE_PIDFILE: pids, FAKE_ENGINE_DECODE_TOK_PER_S: '100', FAKE_ENGINE_BATCH_SLOWDOWN: '0' },
    logDir: join(dir, 'logs'),
  })
const two = vllm(2)
const eight = vllm(8)
// This spec tests the wiring (ids, shared launches, ladders, matchers); the harness check is tested
// in the runner. Here the client shares two cores with other work, so only gross lateness stops it.
const cell = {
  maxTokens: 8,
  workload: { promptTokens: 32, outputControl: { mode: 'observe' as const } },
  sendLagLimitMs: 100,
  eventLoopDelayLimitMs: 200,
  // A probe's CPU share includes the JIT and GC of a fresh worker: only a client pinned at four cores stops it.
  cpuShareLimit: 4,
}
const slo = { ttftMs: 150 }
// A coarse search (stop at high/low ≤ 2) keeps every probe far from the capacities, so a busy
// machine cannot flip a verdict; each probe lasts at least a second so a growing queue shows.
const search = { bracket: { start: 20, max: 320, resolution: 1 }, percentile: 70, requestsPerProbe: 40, probeSeconds: 1 }

const ladder = sweep({ engine: two, ladder: { rates: [10, 40], durationS: 1 }, ...cell })
const small = capacity({ engine: two, slo, ...search, ...cell })
const large = capacity({ engine: eight, slo, ...search, bracket: { ...search.bracket, start: 40 }, ...cell })

// A named ladder's rungs: its name and each rung's value, never run here (their cells stay pending).
const named = sweep({ id: 'seats2-concurrency-ladder-of-this-spec', engine: two, ladder: { concurrencies: [1, 2] }, ...cell })

// The pattern of docs/spec-api.md: '%s' of the id prints it whole (vitest cuts '$id' at 40 characters).
describe.each(named.steps.map((s) => [s.id, s] as const))('%s', (id, step) => {
  test('the rung is named by the ladder and its value, shown whole in its suite title', ({ task }) => {
    expect(task.suite?.name).toBe(step.id)
    expect(id).toMatch(/^seats2-concurrency-ladder-of-this-spec-c[12]$/)
  })
})

describe('sweeps and capacity searches in a spec', () => {
  test('a rate ladder expands into open-loop cells with ids, rung places and rate × duration requests', async () => {
    expect(ladder.id).toBe('seats2-synthetic-summary-ctx32-rate-sweep')
    expect(ladder.steps.map((s) => s.id)).toEqual(['seats2-synthetic-summary-ctx32-r10', 'seats2-synthetic-summary-ctx32-r40'])
    const measured = await ladder
    expect(measured.steps.map((s) => s.result.record.requests.length)).toEqual([10, 40])
    expect(measured.steps[1]?.result.ladder).toEqual({ sweep: ladder.id, axis: 'rate', value: 40, index: 1, of: 2 })
    expect(measured.steps[1]?.result.record.plan.arrival).toMatchObject({ kind: 'constant', ratePerS: 40 })
    // Below the engine's 25 req/s the SLO holds; above it the queue grows through the cell.
    expect(measured).toMeetSLO({ ...slo, percentile: 50, atRate: 10 })
    expect(measured).not.toMeetSLO({ ...slo, percentile: 50, atRate: 40 })
  })

  test('a capacity search on the shared engine brackets its known capacity', async () => {
    const found = CapacitySearch.parse(await small)
    expect(found.id).toBe('seats2-synthetic-summary-ctx32-capacity-rate')
    // Each probe is a cell of the evidence named by its value: the search's id, then `-r20`, `-r40`….
    expect(found.probes[0]?.value).toBe(20)
    expect(declaredCell(`${found.id}-r20`)?.ladder).toBe(found.id)
    expect(declaredCell(`${found.id}-probe1`)).toBeUndefined()
    expect(found.status).toBe('bracketed')
    expect(found.bracket.low as number).toBeLessThanOrEqual(25)
    expect(found.bracket.high as number).toBeGreaterThan(25)
    // The ladder and the search ran on one launch of their engine.
    expect(launches()).toBe(1)
  })

  test('eight seats sustain more than two: the brackets are apart', async () => {
    const found = await large
    expect(found.bracket.low as number).toBeLessThanOrEqual(100)
    expect(found.bracket.high as number).toBeGreaterThan(100)
    expect(found).toSustainMoreThan(await small, { by: 0.5 })
    expect(await small).not.toSustainMoreThan(await large)
    expect(launches()).toBe(2)
  })
})
