import { describe, expect, test } from 'vitest'
import { Admission } from './admission.ts'
import type { EngineJob } from './scheduler.ts'

const job = (reservedTokens: number): EngineJob => ({ promptTokens: reservedTokens, reservedTokens, step: () => false })

describe('Admission', () => {
  test('seats jobs head first while a seat is free; the head blocks the rest; a release frees its seat', () => {
    const admission = new Admission({ maxBatch: 2, kvBudgetTokens: null })
    const [a, b, c] = [job(1), job(1), job(1)]
    for (const j of [a, b, c]) admission.enqueue(j)
    admission.countQueued()
    expect([admission.next(), admission.next(), admission.next()]).toEqual([a, b, null])
    expect(admission.queued).toBe(1)
    expect(admission.maxQueued).toBe(3)
    expect(admission.release(a)).toBe(true)
    expect(admission.release(a)).toBe(false)
    expect(admission.next()).toBe(c)
  })

  test('reserves each seated job’s KV tokens; the head waits for room even when a later job would fit', () => {
    const admission = new Admission({ maxBatch: null, kvBudgetTokens: 100 })
    const [big, bigger, small] = [job(60), job(50), job(10)]
    for (const j of [big, bigger, small]) admission.enqueue(j)
    expect(admission.next()).toBe(big)
    expect(admission.reservedTokens).toBe(60)
    expect(admission.next()).toBeNull()
    admission.release(big)
    expect(admission.reservedTokens).toBe(0)
    expect([admission.next(), admission.next()]).toEqual([bigger, small])
    expect(admission.reservedTokens).toBe(60)
  })

  test('limited only with a limit; a withdrawn job is no longer waiting; clear drops everything', () => {
    expect(new Admission({ maxBatch: null, kvBudgetTokens: null }).limited).toBe(false)
    const admission = new Admission({ maxBatch: 1, kvBudgetTokens: null })
    expect(admission.limited).toBe(true)
    const [a, b] = [job(5), job(5)]
    admission.enqueue(a)
    admission.enqueue(b)
    admission.withdraw(a)
    expect(admission.next()).toBe(b)
    admission.clear()
    expect([admission.queued, admission.reservedTokens, admission.release(b)]).toEqual([0, 0, false])
  })
})
