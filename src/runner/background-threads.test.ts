import { spawn } from 'node:child_process'
import { getPriority } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, test } from 'vitest'
import { batchBackgroundThreads, threadPolicies, v8WorkersQuiet, WorkerYield } from './background-threads.ts'
import { allowedCpus } from './idle-cpus.ts'

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
  const roomy = 1
  test('lowers the workers on an idle reading with idle CPUs, gives them back on a busy one, and at the end', async () => {
    // Readings judged by hand (no sample is due for an hour), so a loaded machine cannot blur them.
    const yielding = await WorkerYield.start({ sampleMs: 3_600_000, yieldBelowShare: 0.4, restoreAboveShare: 0.55 })
    expect(yielding).not.toBeNull()
    const before = await workerNiceness()
    expect(before.length).toBeGreaterThan(0)
    yielding?.begin()
    yielding?.judge({ share: 0.5, idleCores: roomy }) // between the bounds: as it was
    expect(yielding?.yielding).toBe(false)
    yielding?.judge({ share: 0.1, idleCores: roomy })
    expect(yielding?.yielding).toBe(true)
    expect(await workerNiceness()).toEqual(before.map(() => 19))
    yielding?.judge({ share: 0.5, idleCores: roomy }) // still between: stays yielded
    expect(yielding?.yielding).toBe(true)
    yielding?.judge({ share: 0.9, idleCores: roomy })
    expect(yielding?.yielding).toBe(false)
    expect(await workerNiceness()).toEqual(before)
    yielding?.judge({ share: 0, idleCores: roomy })
    yielding?.end()
    expect(yielding?.yielding).toBe(false)
    expect(await workerNiceness()).toEqual(before)
  })

  test('a thread crowded out by other processes is not room to spare: no CPU idle, no yield, and a yield ends when they come', async () => {
    const yielding = await WorkerYield.start({ sampleMs: 3_600_000 })
    const before = await workerNiceness()
    yielding?.begin()
    yielding?.judge({ share: 0.05, idleCores: 0.2 }) // under a quarter of a core idle
    expect(yielding?.yielding).toBe(false)
    yielding?.judge({ share: 0.05, idleCores: null }) // unknown
    expect(yielding?.yielding).toBe(false)
    yielding?.judge({ share: 0.05, idleCores: 0.25 })
    expect(yielding?.yielding).toBe(true)
    yielding?.judge({ share: 0.05, idleCores: 0.1 }) // between the idle bounds: stays yielded
    expect(yielding?.yielding).toBe(true)
    yielding?.judge({ share: 0.05, idleCores: 0.05 })
    expect(yielding?.yielding).toBe(false)
    expect(await workerNiceness()).toEqual(before)
    yielding?.judge({ share: 0.05, idleCores: 0.5 })
    yielding?.judge({ share: 0.05, idleCores: null })
    expect(yielding?.yielding).toBe(false)
    yielding?.end()
  })

  test('reads the thread and the CPUs: an idle thread yields within a few readings', async () => {
    // Any idle time will do and nothing gives the share back, so the suite's load beside it can
    // neither hold the yield off nor end it before it is seen.
    const yielding = await WorkerYield.start({
      sampleMs: 50,
      yieldBelowShare: 0.02,
      restoreAboveShare: 1,
      yieldWithIdleCores: 0,
      restoreBelowIdleCores: 0,
    })
    const before = await workerNiceness()
    yielding?.begin()
    for (let waited = 0; !yielding?.yielding && waited < 3000; waited += 50) await sleep(50)
    expect(yielding?.yielding).toBe(true)
    expect(await workerNiceness()).toEqual(before.map(() => 19))
    yielding?.end()
    expect(yielding?.yielding).toBe(false)
  })

  test('reads the CPUs: an idle thread whose CPUs other processes keep busy does not yield', async () => {
    const cpus = (await allowedCpus()) ?? []
    const loops = cpus.map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
    const yielding = await WorkerYield.start({ sampleMs: 50, yieldBelowShare: 0.02, restoreAboveShare: 0.06 })
    try {
      await sleep(200) // the loops are running
      yielding?.begin()
      await sleep(400)
      expect(yielding?.yielding).toBe(false)
    } finally {
      yielding?.end()
      for (const loop of loops) loop.kill('SIGKILL')
    }
  })
})

describe.runIf(process.platform === 'linux')('v8WorkersQuiet', () => {
  test("waits while V8's workers run, and never past its bound", async () => {
    // Fresh functions made hot: V8 compiles them on its workers, which then have work to finish.
    const fns = Array.from(
      { length: 30 },
      (_, k) => new Function('x', `let s = ${k}; for (let i = 0; i < 50; i++) s += (x * i) % 7; return s`),
    )
    let sum = 0
    for (let i = 0; i < 3000; i++) for (const f of fns) sum += f(i) as number
    expect(sum).toBeGreaterThan(0)
    const waited = await v8WorkersQuiet(200)
    expect(waited).toBeGreaterThanOrEqual(2) // at least one reading after a sleep
    expect(waited).toBeLessThan(400)
    expect(await v8WorkersQuiet(5)).toBeLessThan(200)
  })
})
