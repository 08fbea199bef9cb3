import { describe, expect, test } from 'vitest'
import { SequencePool } from './sequence-pool.ts'

describe('SequencePool', () => {
  test('lends each free one at once, then makes later requests wait, served in arrival order as they come back', async () => {
    const pool = new SequencePool(['a', 'b'])
    const first = [await pool.acquire(), await pool.acquire()].sort()
    expect(first).toEqual(['a', 'b'])
    const served: string[] = []
    const third = pool.acquire().then((s) => served.push(`third:${s}`))
    const fourth = pool.acquire().then((s) => served.push(`fourth:${s}`))
    expect(pool.waiting).toBe(2)
    pool.release('b')
    pool.release('a')
    await Promise.all([third, fourth])
    expect(served).toEqual(['third:b', 'fourth:a'])
    expect(pool.waiting).toBe(0)
  })

  test('one given back with nobody waiting is free again', async () => {
    const pool = new SequencePool([1])
    const one = await pool.acquire()
    pool.release(one)
    expect(await pool.acquire()).toBe(1)
  })
})
