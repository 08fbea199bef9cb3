/**
 * The demo's regression, run on its own into its own evidence: v3 keeps v2's faster decoding but
 * prefills at half the speed, so its time to first token regresses. The decode win does
 * not excuse it: the latency gate fails and the evidence is not promotable. `servegate demo` runs it.
 */
import { describe, expect, test } from 'vitest'
import { engine, pair } from '../../src/index.ts'

const v1 = engine.sim({ name: 'sim-v1', model: { id: 'demo-model' }, sim: { decodeTokPerS: 300 } })
const v3 = engine.sim({ name: 'sim-v3-slow-prefill', model: { id: 'demo-model' }, sim: { decodeTokPerS: 600, prefillTokPerS: 10000 } })

describe('v3 (faster decode, slower prefill) against v1', () => {
  const result = pair({
    id: 'demo-prefill-regression',
    baseline: v1,
    candidate: v3,
    concurrency: 1,
    requests: 24,
    warmupRequests: 4,
    maxTokens: 24,
    workload: { promptTokens: 1024, seed: 7 },
  })

  test('is a matched pair', async () => expect(await result).toBeMatchedPair())
  test('wins decode by at least 10%', async () => expect(await result).toWinDecode({ margin: 0.1 }))
  test('holds median time to first token within 10%', async () =>
    expect(await result).toHoldLatency({ metric: 'timeToFirstOutput', percentile: 50, notWorseThanPct: 10 }))
})
