import { describe, expect, test } from 'vitest'
import { type GaugeSource, SimGauges } from './sim-gauges.ts'

/** A source whose readings the test sets. */
function source(): GaugeSource & { now: { running: number; reserved: number; open: number } } {
  const now = { running: 0, reserved: 0, open: 0 }
  return { now, running: () => now.running, leaked: () => 0, reservedTokens: () => now.reserved, openStreams: () => now.open }
}

describe('SimGauges', () => {
  test('most dialects read the gauges live; without a KV budget the usage is the batch over 64 seats', () => {
    const s = source()
    const gauges = new SimGauges({ dialect: 'vllm', decodeLogInterval: 40, kvBudgetTokens: null }, s)
    expect(gauges.hooks).toEqual({})
    Object.assign(s.now, { running: 16, open: 20 })
    expect(gauges.read()).toEqual({ running: 16, waiting: 4, kvUsage: 0.25 })
    Object.assign(s.now, { running: 100, open: 100 })
    expect(gauges.read().kvUsage).toBe(1)
  })

  test('with a KV budget the usage is the reserved share of it', () => {
    const s = source()
    Object.assign(s.now, { running: 2, open: 2, reserved: 300 })
    expect(new SimGauges({ dialect: 'vllm', decodeLogInterval: 40, kvBudgetTokens: 1000 }, s).read().kvUsage).toBeCloseTo(0.3, 12)
  })

  test('SGLang publishes at a prefill and every decodeLogInterval steps; a scrape between reads the last values', () => {
    const s = source()
    const gauges = new SimGauges({ dialect: 'sglang', decodeLogInterval: 3, kvBudgetTokens: null }, s)
    expect(gauges.read()).toEqual({ running: 0, waiting: 0, kvUsage: 0 })
    Object.assign(s.now, { running: 4, open: 6 })
    gauges.hooks.onPrefill?.(4)
    expect(gauges.read()).toEqual({ running: 4, waiting: 2, kvUsage: 4 / 64 })
    Object.assign(s.now, { running: 8, open: 8 })
    gauges.hooks.onStep?.(1, 8)
    gauges.hooks.onStep?.(2, 8)
    expect(gauges.read().running).toBe(4)
    gauges.hooks.onStep?.(3, 8)
    expect(gauges.read()).toEqual({ running: 8, waiting: 0, kvUsage: 8 / 64 })
  })
})
