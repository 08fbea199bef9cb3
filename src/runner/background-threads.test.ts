import { describe, expect, test } from 'vitest'
import { batchBackgroundThreads, threadPolicies } from './background-threads.ts'

const SCHED_OTHER = 0
const SCHED_BATCH = 3

describe.runIf(process.platform === 'linux')('batchBackgroundThreads', () => {
  test("puts V8's workers and libuv's threadpool under SCHED_BATCH and leaves the JavaScript threads as they were", async () => {
    const before = await threadPolicies()
    expect(before.some((t) => t.name === 'V8Worker')).toBe(true)
    const main = before.find((t) => t.tid === process.pid)
    expect(main?.policy).toBe(SCHED_OTHER)

    const batched = await batchBackgroundThreads()

    const after = await threadPolicies()
    const background = after.filter((t) => ['V8Worker', 'DelayedTaskSche', 'libuv-worker'].includes(t.name))
    expect(batched).toBe(background.length)
    expect(background.map((t) => [t.name, t.policy])).toEqual(background.map((t) => [t.name, SCHED_BATCH]))
    expect(after.find((t) => t.tid === process.pid)?.policy).toBe(SCHED_OTHER)
    // Already batched: nothing to change, the same count.
    expect(await batchBackgroundThreads()).toBe(batched)
  })
})
