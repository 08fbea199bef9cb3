import { describe, expect, test } from 'vitest'
import { getHeapSpaceStatistics } from 'node:v8'
import { settleYoung, warmRequestPath } from './warm.ts'

/** This process's open TCP servers and sockets, as Node counts its active resources. */
function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length
}

describe('warmRequestPath', () => {
  test('streams its requests whole over loopback, once a thread, and leaves nothing open', async () => {
    const before = tcpHandles()
    const first = warmRequestPath()
    expect(warmRequestPath()).toBe(first)
    expect(await first).toBe(600)
    // Closed sockets leave the list on the next turns.
    await expect.poll(tcpHandles).toBe(before)
  })
})

describe('settleYoung', () => {
  test('empties the young generation: what was just allocated and dropped is gone after it', () => {
    const youngUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_used_size ?? 0
    settleYoung()
    let kept = 0
    for (let i = 0; i < 2000; i++) kept += new Array(32).fill(i).length // ~0.5 MB of garbage
    const before = youngUsed()
    settleYoung()
    expect(kept).toBe(64_000)
    expect(youngUsed()).toBeLessThan(before / 2)
  })
})
