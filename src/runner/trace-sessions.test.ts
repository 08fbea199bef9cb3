import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { parseTrace } from '../load/trace.ts'
import { type SimServer, startSimServer } from '../sim/server.ts'
import { runCell } from './measure-cell.ts'

const TRACE = join(import.meta.dirname, '../../fixtures/traces/aiperf-sessions.jsonl')
const servers: SimServer[] = []
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()))
})

describe("a trace's sessions (AIPerf's session_id and delay)", () => {
  test('a later turn waits for its session’s previous one; it needs no timestamp; a row without either is refused', () => {
    const rows = parseTrace(
      [
        '{"session_id":"x","timestamp":5,"input_length":8,"output_length":1}',
        '{"session_id":"x","delay":20,"input_length":9,"output_length":1}',
      ].join('\n'),
      't.jsonl',
    )
    expect(rows.map((r) => [r.after, r.turn, r.delayMs])).toEqual([
      [null, 1, null],
      [0, 2, 20],
    ])
    expect(() => parseTrace('{"session_id":"x","delay":20,"input_length":9,"output_length":1}', 't.jsonl')).toThrow(
      /t\.jsonl:1: missing field `timestamp`/,
    )
  })

  test('replayed on the sim: each later turn goes its delay after its session’s previous turn ended; records keep session and turn', async () => {
    const sim = await startSimServer({ model: 'm', decodeTokPerS: 200, prefillTokPerS: 100_000 })
    servers.push(sim)
    const record = await runCell({
      baseUrl: sim.url,
      model: 'm',
      requests: 6,
      calibrate: false,
      arrival: { kind: 'trace', path: TRACE },
    })
    expect(record.completed).toBe(6)
    expect(record.requests.map((r) => [r.session, r.turn])).toEqual([
      [0, 1],
      [1, 1],
      [0, 2],
      [1, 2],
      [0, 3],
      [null, null],
    ])
    const end = (i: number) => (record.requests[i]?.startOffsetMs as number) + (record.requests[i]?.e2eMs as number)
    const start = (i: number) => record.requests[i]?.startOffsetMs as number
    // Turn 2 of session a: 150 ms after its turn 1 ended (4 tokens at 200 tok/s: about 20 ms), not at any offset of its own.
    expect(start(2)).toBeGreaterThanOrEqual(end(0) + 149)
    expect(start(3)).toBeGreaterThanOrEqual(end(1) + 149)
    expect(start(4)).toBeGreaterThanOrEqual(end(2) + 49)
    // The untimed-session row goes at its own time, before the later turns.
    expect(start(5)).toBeLessThan(start(2))
    expect(record.requests[2]?.scheduledOffsetMs as number).toBeCloseTo(end(0) + 150, -1)
  })
})
