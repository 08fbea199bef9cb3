import { readdirSync, readFileSync } from 'node:fs'
import { getPriority } from 'node:os'
import { describe, expect, test } from 'vitest'
import { lowerV8Workers, warmRequestPath } from './warm.ts'

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

describe.runIf(process.platform === 'linux')('lowerV8Workers', () => {
  test("lowers V8's platform threads to niceness 19 while held, leaves the others, and restores them when the last hold ends", () => {
    const threads = readdirSync('/proc/self/task').map((tid) => ({
      tid: Number(tid),
      comm: readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim(),
    }))
    const workers = threads.filter((t) => t.comm === 'V8Worker')
    expect(workers.length).toBeGreaterThan(0)
    const priorities = (): number[][] => threads.map((t) => [t.tid, getPriority(t.tid)])
    const before = priorities()
    const first = lowerV8Workers()
    const second = lowerV8Workers()
    for (const w of workers) expect(getPriority(w.tid)).toBe(19)
    const others = (p: number[][]) => p.filter(([tid]) => !workers.some((w) => w.tid === tid))
    expect(others(priorities())).toEqual(others(before))
    first()
    first() // a second release of the same hold changes nothing
    for (const w of workers) expect(getPriority(w.tid)).toBe(19)
    second()
    expect(priorities()).toEqual(before)
  })
})
