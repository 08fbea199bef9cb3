import { afterAll, describe, expect, test } from 'vitest'
import type { ServegateError } from '../errors.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { runCell } from './measure-cell.ts'
import { resolveCellPlan } from './cell-options.ts'
import { prepareWorkload } from '../workload/prepare.ts'
import { pairMismatches } from '../gates/fairness.ts'
import { testManifest } from '../../fixtures/manifest.ts'

const servers: SimServer[] = []
async function sim(model: string): Promise<SimServer> {
  const s = await startSimServer({ model, decodeTokPerS: 5_000, prefillTokPerS: 500_000 })
  servers.push(s)
  return s
}
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()))
})

const conversation = (history: 'replayed' | 'live') =>
  ({ kind: 'conversation', sessions: 4, turns: 3, userTokens: 40, systemTokens: 60, assistantTokens: 20, history, seed: 7 }) as const

describe('a conversation cell', () => {
  test('replayed: sessions × turns requests, each with its session and turn; prompts grow turn by turn; both arms send the same bytes', async () => {
    const [a, b] = [await sim('arm-a'), await sim('arm-b')]
    const cell = { concurrency: 2, maxTokens: 8, workload: conversation('replayed') }
    const ra = await runCell({ baseUrl: a.url, model: 'arm-a', ...cell })
    const rb = await runCell({ baseUrl: b.url, model: 'arm-b', ...cell })
    expect(ra.plan.requests).toBe(12)
    expect(ra.completed).toBe(12)
    expect(ra.requests.map((r) => [r.session, r.turn])).toEqual(Array.from({ length: 12 }, (_, i) => [Math.floor(i / 3), (i % 3) + 1]))
    const w = ra.plan.workload
    expect(w.kind).toBe('conversation')
    expect(w.conversation).toEqual({
      sessions: 4,
      turns: 3,
      userTokens: 40,
      systemTokens: 60,
      assistantTokens: 20,
      thinkTimeMs: 0,
      history: 'replayed',
    })
    expect(w.requestStreamSha256).toMatch(/^[0-9a-f]{64}$/)
    expect(rb.plan.workload.requestStreamSha256).toBe(w.requestStreamSha256)
    expect([w.wireStreamSha256, rb.plan.workload.wireStreamSha256]).toEqual([w.requestStreamSha256, w.requestStreamSha256])
    expect(w.wireMatchesPlan).toBe(true)
    // Each turn carries the whole history: about a user and an assistant turn more than the one before.
    const byTurn = ra.metrics.byTurn ?? []
    expect(byTurn.map((t) => [t.turn, t.completed, t.failed])).toEqual([
      [1, 4, 0],
      [2, 4, 0],
      [3, 4, 0],
    ])
    const p50 = byTurn.map((t) => t.promptTokens.p50 as number)
    expect(p50[1] as number).toBeGreaterThan((p50[0] as number) + 40)
    expect(p50[2] as number).toBeGreaterThan((p50[1] as number) + 40)
    // A session's turns go one after another.
    for (const r of ra.requests.filter((q) => (q.turn as number) > 1)) {
      const before = ra.requests[r.index - 1]
      expect(r.startOffsetMs as number).toBeGreaterThanOrEqual((before?.startOffsetMs as number) + (before?.e2eMs as number) - 1)
    }
  })

  test('live: the history is what each model answered; the planned user turns match across arms, the wire is not the plan', async () => {
    const [a, b] = [await sim('live-a'), await sim('live-b')]
    const cell = { concurrency: 2, maxTokens: 8, workload: conversation('live') }
    const ra = await runCell({ baseUrl: a.url, model: 'live-a', ...cell })
    const rb = await runCell({ baseUrl: b.url, model: 'live-b', ...cell })
    expect([ra.completed, rb.completed]).toEqual([12, 12])
    expect(ra.plan.workload.conversation?.assistantTokens).toBeNull()
    expect(rb.plan.workload.requestStreamSha256).toBe(ra.plan.workload.requestStreamSha256)
    expect(ra.plan.workload.wireMatchesPlan).toBeNull()
    expect(ra.plan.workload.wireStreamSha256).not.toBe(ra.plan.workload.requestStreamSha256)
    // Turn 2 carries turn 1's reply (8 tokens) where a replayed one carried 20.
    const replayed = await runCell({ baseUrl: a.url, model: 'live-a', ...cell, workload: conversation('replayed') })
    const turn2 = (r: typeof ra) => r.metrics.byTurn?.[1]?.promptTokens.p50 as number
    expect(turn2(replayed) - turn2(ra)).toBeGreaterThan(5)
    // The pair check compares the planned turns: only the served names and the missing manifests (external endpoints) differ.
    expect(pairMismatches({ baseline: [ra], candidate: [rb] })).toEqual([
      'served model: live-a ≠ live-b (baseline live-a, candidate live-b)',
      'baseline: no manifest (engine, model, GPU and harness facts are unknown)',
      'candidate: no manifest (engine, model, GPU and harness facts are unknown)',
    ])
    expect(pairMismatches({ baseline: [ra], candidate: [replayed] })).toContainEqual(expect.stringMatching(/^conversation: baseline /))
    // The matcher's message says the histories differ by design.
    const withManifest = (r: typeof ra) => ({ ...r, target: { ...r.target, model: 'm' }, manifest: testManifest() })
    const pair = {
      kind: 'pair',
      id: 'live',
      baseline: [withManifest(ra)],
      candidate: [withManifest(rb)],
      launchOrder: ['baseline', 'candidate'],
    }
    expect(() => expect(pair).not.toBeMatchedPair()).toThrow(
      /live: each arm sends its own replies back, so assistant turns differ by design/,
    )
  })
})

describe('a conversation declared wrong fails before any engine starts, naming the fix', () => {
  test.each([
    [
      { requests: 10, workload: conversation('replayed') },
      /requests: a conversation sends sessions × turns = 12 requests, not 10; remove requests or set it to 12/,
    ],
    [{ workload: { kind: 'conversation', turns: 2, userTokens: 32 } }, /workload\.sessions: a conversation needs sessions/],
    [
      { workload: { kind: 'synthetic-summary', turns: 2 } },
      /workload\.turns: only a conversation takes turns; set kind: 'conversation' or remove it/,
    ],
    [{ workload: conversation('replayed'), arrival: { kind: 'poisson', ratePerS: 2 } }, /arrival: a conversation is sent closed loop/],
    [{ workload: { ...conversation('replayed'), history: 'forgotten' } }, /workload\.history/],
  ])('%j', (plan, message) => {
    expect(() => resolveCellPlan(plan)).toThrow(message)
    try {
      resolveCellPlan(plan)
    } catch (err) {
      expect((err as ServegateError).code).toBe('CONFIG_INVALID')
    }
  })

  test('a plan of 100,000 sessions is ready at once; bodies are built only when asked', async () => {
    const started = performance.now()
    const w = await prepareWorkload(
      { kind: 'conversation', sessions: 100_000, turns: 4, userTokens: 64 },
      { api: 'chat', maxTokens: 16, requests: 400_000, warmupRequests: 0 },
      null,
    )
    expect(performance.now() - started).toBeLessThan(1_000)
    expect(w.planned(399_999)).toMatchObject({ session: 99_999, turn: 4 })
    const body = JSON.parse(w.request(399_999).body) as { messages: Array<{ role: string }> }
    expect(body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user'])
  })
})
