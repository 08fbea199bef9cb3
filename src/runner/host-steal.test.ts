import { existsSync } from 'node:fs'
import { expect, test } from 'vitest'
import { type CpuTicks, HostSteal, parseProcStat, readCpuTicks } from './host-steal.ts'

// The head of a real /proc/stat (2 vCPUs, a cloud VM): user nice system idle iowait irq softirq steal guest guest_nice.
const PROC_STAT = `cpu  799173 866 158094 5694676 3340 0 25013 43705 0 0
cpu0 399048 408 82770 2847141 800 0 6240 26614 0 0
cpu1 400125 457 75324 2847534 2539 0 18772 17090 0 0
intr 17112263 0 0 0
ctxt 47834898
`

test('the aggregate cpu line gives the total, the steal and the busy ticks; guest is not counted twice', () => {
  expect(parseProcStat(PROC_STAT)).toEqual({
    totalTicks: 799173 + 866 + 158094 + 5694676 + 3340 + 0 + 25013 + 43705,
    stealTicks: 43705,
    busyTicks: 799173 + 866 + 158094 + 0 + 25013 + 43705,
  })
  // guest (9th) and guest_nice (10th) are already inside user and nice.
  expect(parseProcStat('cpu  10 0 5 80 1 0 2 2 7 3\n')).toEqual({ totalTicks: 100, stealTicks: 2, busyTicks: 19 })
})

test('a kernel too old for steal, or a text with no cpu line, is read as it is', () => {
  expect(parseProcStat('cpu  10 0 5 85\n')).toEqual({ totalTicks: 100, stealTicks: 0, busyTicks: 15 })
  expect(parseProcStat('cpu0 1 2 3 4\nintr 5\n')).toBeNull()
  expect(parseProcStat('cpu  a b c d\n')).toBeNull()
})

test('the share sums steal and total ticks over the spans measured, not between them', () => {
  const readings: CpuTicks[] = [
    { totalTicks: 1000, stealTicks: 10, busyTicks: 0 },
    { totalTicks: 1200, stealTicks: 14, busyTicks: 0 }, // span 1: 4 of 200
    { totalTicks: 5000, stealTicks: 900, busyTicks: 0 }, // between the spans: not measured
    { totalTicks: 5200, stealTicks: 916, busyTicks: 0 }, // span 2: 16 of 200
  ]
  const meter = new HostSteal(() => readings.shift() ?? null)
  meter.start()
  meter.stop()
  meter.start()
  meter.stop()
  expect(meter.share()).toBeCloseTo(20 / 400, 12)
})

test('no share where /proc/stat cannot be read, or where no tick passed', () => {
  const unreadable = new HostSteal(() => null)
  unreadable.start()
  unreadable.stop()
  expect(unreadable.share()).toBeNull()
  const still = new HostSteal(() => ({ totalTicks: 5, stealTicks: 1, busyTicks: 1 }))
  still.start()
  still.stop()
  expect(still.share()).toBeNull()
  expect(readCpuTicks('/nonexistent/stat')).toBeNull()
})

test.runIf(existsSync('/proc/stat'))("this machine's /proc/stat reads, and its ticks only grow", async () => {
  const before = readCpuTicks()
  await new Promise((resolve) => setTimeout(resolve, 30))
  const after = readCpuTicks()
  expect(before).not.toBeNull()
  expect(after!.totalTicks).toBeGreaterThan(before!.totalTicks)
  expect(after!.stealTicks).toBeGreaterThanOrEqual(before!.stealTicks)
})
