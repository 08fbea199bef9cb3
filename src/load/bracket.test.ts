import { describe, expect, test } from 'vitest'
import { bracketSearch, type ProbeVerdict, type ResolvedBracketOptions, resolveBracketOptions } from './bracket.ts'

const options = (o: Parameters<typeof resolveBracketOptions>[0]): ResolvedBracketOptions => {
  const r = resolveBracketOptions(o)
  if ('error' in r) throw new Error(r.error)
  return r
}

/** An engine that meets its SLO up to `capacity` exactly. */
const threshold = (capacity: number) => async (value: number) => ({
  verdict: { outcome: value <= capacity ? 'pass' : 'fail', invalid: null } as ProbeVerdict,
  probe: value,
})

describe('bracketSearch', () => {
  test('doubles up to the first failure, then bisects geometrically until high/low ≤ 1 + resolution', async () => {
    const r = await bracketSearch(options({ start: 20, max: 160, resolution: 0.1 }), threshold(50))
    expect(r.probes.map((p) => Number(p.value.toFixed(2)))).toEqual([20, 40, 80, 56.57, 47.57, 51.87])
    expect(r.status).toBe('bracketed')
    expect(r.bracket.low as number).toBeLessThanOrEqual(50)
    expect(r.bracket.high as number).toBeGreaterThan(50)
    expect((r.bracket.high as number) / (r.bracket.low as number)).toBeLessThanOrEqual(1.1)
  })

  test('halves down from a failing start; integers for concurrency, down to adjacent values', async () => {
    const down = await bracketSearch(options({ start: 64, resolution: 0.2 }), threshold(10))
    expect(down.probes.map((p) => p.value).slice(0, 3)).toEqual([64, 32, 16])
    expect(down.status).toBe('bracketed')
    const c = await bracketSearch(options({ axis: 'concurrency', start: 4, max: 64, maxProbes: 10 }), threshold(11))
    expect(c.probes.map((p) => p.value)).toEqual([4, 8, 16, 12, 10, 11])
    expect(c.bracket).toEqual({ low: 11, high: 12 })
  })

  test('every way a search ends', async () => {
    expect((await bracketSearch(options({ start: 4, max: 8 }), threshold(100))).status).toBe('above-max')
    const below = await bracketSearch(options({ start: 4, min: 1 }), threshold(0.5))
    expect(below).toMatchObject({ status: 'below-min', bracket: { low: null, high: 1 } })
    expect((await bracketSearch(options({ start: 1, max: 1000, maxProbes: 3 }), threshold(100))).status).toBe('unbracketed')
    const unresolved = await bracketSearch(options({ start: 1, max: 1000, maxProbes: 5, resolution: 0.01 }), threshold(10))
    expect(unresolved).toMatchObject({ status: 'unresolved', bracket: { low: 8, high: 16 } })
    const limited = await bracketSearch(options({ start: 4 }), async (value) => ({
      verdict: {
        outcome: 'pass',
        invalid: value > 8 ? { status: 'harness-limited', reason: 'send lag p99 9 ms > 5 ms' } : null,
      } as ProbeVerdict,
      probe: value,
    }))
    expect(limited).toMatchObject({ status: 'harness-limited', bracket: { low: 8, high: null } })
  })

  test('a cancelled search stops before its next probe, keeping the ones it ran', async () => {
    const controller = new AbortController()
    const r = await bracketSearch(
      options({ start: 4 }),
      async (value) => {
        controller.abort()
        return { verdict: { outcome: 'pass', invalid: null } as ProbeVerdict, probe: value }
      },
      controller.signal,
    )
    expect(r).toMatchObject({ status: 'interrupted', bracket: { low: 4, high: null } })
    expect(r.probes).toHaveLength(1)
  })

  test('an inconclusive probe is not shown to meet the SLO: it bounds the bracket from above', async () => {
    const r = await bracketSearch(options({ start: 10, maxProbes: 2 }), async (value) => ({
      verdict: { outcome: value > 10 ? 'inconclusive' : 'pass', invalid: null } as ProbeVerdict,
      probe: value,
    }))
    expect(r.bracket).toEqual({ low: 10, high: 20 })
  })

  test('a range that does not hold its start is refused', () => {
    expect(resolveBracketOptions({ start: 10, min: 20 })).toEqual({ error: 'start: 10 must lie within [min 20, max 160]' })
    expect(resolveBracketOptions({ axis: 'concurrency', start: 2.5 })).toEqual({
      error: 'start: a concurrency search starts at an integer',
    })
  })
})
