import { getPriority } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, test } from 'vitest'
import { batchBackgroundThreads, threadPolicies, WorkerYield } from './background-threads.ts'

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

/** The niceness of this process's V8 workers, one entry per worker. */
async function workerNiceness(): Promise<number[]> {
  const workers = (await threadPolicies()).filter((t) => t.name === 'V8Worker')
  return workers.map((t) => getPriority(t.tid))
}

// Setting a lower niceness back needs CAP_SYS_NICE: without it, start() declines and this does not apply.
const privileged = process.platform === 'linux' && (process.getuid?.() ?? -1) === 0

describe.runIf(privileged)('WorkerYield', () => {
  test('lowers the workers on an idle reading, gives them back on a busy one, and at the end', async () => {
    // Readings judged by hand (no sample is due for an hour), so a loaded machine cannot blur them.
    const yielding = await WorkerYield.start({ sampleMs: 3_600_000, yieldBelowShare: 0.4, restoreAboveShare: 0.55 })
    expect(yielding).not.toBeNull()
    const before = await workerNiceness()
    expect(before.length).toBeGreaterThan(0)
    yielding?.begin()
    yielding?.judge(0.5) // between the bounds: as it was
    expect(yielding?.yielding).toBe(false)
    yielding?.judge(0.1)
    expect(yielding?.yielding).toBe(true)
    expect(await workerNiceness()).toEqual(before.map(() => 19))
    yielding?.judge(0.5) // still between: stays yielded
    expect(yielding?.yielding).toBe(true)
    yielding?.judge(0.9)
    expect(yielding?.yielding).toBe(false)
    expect(await workerNiceness()).toEqual(before)
    yielding?.judge(0)
    yielding?.end()
    expect(yielding?.yielding).toBe(false)
    expect(await workerNiceness()).toEqual(before)
  })

  test('reads the thread: an idle one yields within a few readings', async () => {
    const yielding = await WorkerYield.start({ sampleMs: 50, yieldBelowShare: 0.02, restoreAboveShare: 0.06 })
    yielding?.begin()
    await sleep(300)
    expect(yielding?.yielding).toBe(true)
    yielding?.end()
    expect(yielding?.yielding).toBe(false)
  })
})
