import { describe, expect, test } from 'vitest'
import { warmRequestPath } from './warm.ts'

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
