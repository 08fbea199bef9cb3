import { spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, test } from 'vitest'
import { parsePerCpuStat } from './host-steal.ts'
import { allowedCpus, IdleCpus, idleCores, parseCpuList } from './idle-cpus.ts'

test('a CPU list reads as its numbers; anything else is refused', () => {
  expect(parseCpuList('0-2,5\n')).toEqual([0, 1, 2, 5])
  expect(parseCpuList('7')).toEqual([7])
  expect(parseCpuList('3-1')).toBeNull()
  expect(parseCpuList('0-1,x')).toBeNull()
  expect(parseCpuList('')).toBeNull()
})

test("each CPU's ticks are read from its own line, and the interrupt counts after them are left alone", () => {
  const cpus = parsePerCpuStat('cpu  30 0 10 60 0 0 0 0 0 0\ncpu0 20 0 5 25 0 0 0 0\ncpu1 10 0 5 35 0 0 0 0\nintr 1 2 3\ncpu9 1 1 1 1\n')
  expect([...cpus.keys()]).toEqual([0, 1])
  expect(cpus.get(0)).toEqual({ totalTicks: 50, stealTicks: 0, busyTicks: 25 })
})

test('idle cores are each CPU’s idle share summed, over only the CPUs asked for', () => {
  const at = (busy: number[], total: number[]) =>
    new Map(busy.map((b, i) => [i, { totalTicks: total[i] as number, busyTicks: b, stealTicks: 0 }]))
  const before = at([0, 0, 0], [0, 0, 0])
  const after = at([10, 5, 0], [10, 10, 10]) // CPU 0 busy, 1 half idle, 2 idle
  expect(idleCores(before, after, [0, 1])).toBeCloseTo(0.5)
  expect(idleCores(before, after, [0, 1, 2])).toBeCloseTo(1.5)
  expect(idleCores(before, after, [3])).toBeNull() // not in the file
  expect(idleCores(before, before, [0])).toBeNull() // no tick passed
})

describe.runIf(process.platform === 'linux')('IdleCpus on this machine', () => {
  test('a busy loop on every CPU the process may use leaves next to none of them idle', async () => {
    const cpus = await allowedCpus()
    expect(cpus?.length).toBeGreaterThan(0)
    const idle = await IdleCpus.open()
    const loops = (cpus ?? []).map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
    try {
      await sleep(200) // the loops are running
      expect(await idle?.read()).toBeNull() // the first reading starts the count
      await sleep(400)
      const busy = await idle?.read()
      expect(busy).toBeGreaterThanOrEqual(0)
      expect(busy).toBeLessThan(0.25) // what WorkerYield needs idle to yield
    } finally {
      for (const loop of loops) loop.kill('SIGKILL')
    }
  })
})
