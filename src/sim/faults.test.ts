import { describe, expect, test } from 'vitest'
import { createFaultPlan } from './faults.ts'

const draw = (plan: ReturnType<typeof createFaultPlan>, requests: number) => Array.from({ length: requests }, (_, index) => plan(index))

describe('createFaultPlan', () => {
  test('listed requests take their kind; the rest are clean at rate 0', () => {
    const plan = createFaultPlan({
      faults: [
        { kind: 'drop', requests: [1, 3] },
        { kind: 'empty', requests: [3, 4] },
      ],
      faultRate: 0,
      faultKinds: ['stall'],
      seed: 0,
    })
    expect(draw(plan, 6)).toEqual([null, 'drop', null, 'drop', 'empty', null])
  })

  test('rate draws are deterministic per seed, round-robin over faultKinds, and near the rate', () => {
    const options = { faults: [], faultRate: 0.3, faultKinds: ['http500', 'stall'] as const, seed: 11 }
    const first = draw(createFaultPlan({ ...options, faultKinds: [...options.faultKinds] }), 1000)
    expect(draw(createFaultPlan({ ...options, faultKinds: [...options.faultKinds] }), 1000)).toEqual(first)
    const hits = first.filter((kind) => kind !== null)
    expect(hits.length).toBeGreaterThan(240)
    expect(hits.length).toBeLessThan(360)
    expect(hits.slice(0, 4)).toEqual(['http500', 'stall', 'http500', 'stall'])
    const other = draw(createFaultPlan({ ...options, faultKinds: [...options.faultKinds], seed: 12 }), 1000)
    expect(other).not.toEqual(first)
  })

  test('a listed fault does not shift the random draws of other requests', () => {
    const base = { faultRate: 0.5, faultKinds: ['malformed' as const], seed: 3 }
    const plain = draw(createFaultPlan({ ...base, faults: [] }), 50)
    const listed = draw(createFaultPlan({ ...base, faults: [{ kind: 'http429', requests: [0] }] }), 50)
    expect(listed[0]).toBe('http429')
    expect(listed.slice(1).map((kind) => kind !== null)).toEqual(plain.slice(1).map((kind) => kind !== null))
  })
})
