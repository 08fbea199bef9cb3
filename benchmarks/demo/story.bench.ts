/**
 * The demo's story on servegate's simulated engine (no GPU, no model; each arm a child process):
 * a new build that decodes twice as fast wins decode and holds its time to first token, and a pair
 * whose candidate serves another model is refused. `servegate demo` runs it (and copies it into
 * `.servegate/demo/` for `servegate demo --sim` from an installed package).
 */
import { describe, expect, test } from 'vitest'
import { engine, pair } from '../../src/index.ts'

// v1 decodes a stream at 300 tokens/s; v2's new decode kernel at 600 (2×). Prefill is the same. One
// request at a time: the time to first token is the prefill alone, which the decode speed does not touch.
const v1 = engine.sim({ name: 'sim-v1', model: { id: 'demo-model' }, sim: { decodeTokPerS: 300 } })
const v2 = engine.sim({ name: 'sim-v2-decode-kernel', model: { id: 'demo-model' }, sim: { decodeTokPerS: 600 } })
const plan = { concurrency: 1, requests: 24, warmupRequests: 4, maxTokens: 24, workload: { promptTokens: 1024, seed: 7 } }

describe('v2 (a new decode kernel) against v1', () => {
  const result = pair({ id: 'demo-decode-kernel', baseline: v1, candidate: v2, ...plan })

  test('is a matched pair: same model, same request bytes', async () => expect(await result).toBeMatchedPair())
  test('wins decode by at least 10%', async () => expect(await result).toWinDecode({ margin: 0.1 }))
  test('holds median time to first token within 10%', async () =>
    expect(await result).toHoldLatency({ metric: 'timeToFirstOutput', percentile: 50, notWorseThanPct: 10 }))
})

describe('an unfair pair', () => {
  // The candidate serves another (say, quantized) model: its figures say nothing about v1's.
  // Not required, so it does not block promotion: the check refusing it is the point.
  const quantized = engine.sim({ name: 'sim-v2-int4', model: { id: 'demo-model-int4' }, sim: { decodeTokPerS: 900 } })
  const unfair = pair({ id: 'demo-other-model', required: false, baseline: v1, candidate: quantized, ...plan, requests: 8 })

  test('another model is refused as a pair', async () => expect(await unfair).not.toBeMatchedPair())
})
