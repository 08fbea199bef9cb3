import { Worker } from 'node:worker_threads'
import { expect, test } from 'vitest'
import { monoMs } from './clock.ts'

test('monoMs reads process.hrtime’s scale in this thread', () => {
  const [s, ns] = process.hrtime()
  const hr = s * 1e3 + ns / 1e6
  expect(Math.abs(monoMs() - hr)).toBeLessThan(1)
  const a = monoMs()
  expect(monoMs()).toBeGreaterThanOrEqual(a)
})

test('a stamp taken in a worker thread falls between two taken around it in this one', async () => {
  const url = new URL('./clock.ts', import.meta.url).href
  const worker = new Worker(`import('${url}').then(({ monoMs }) => require('node:worker_threads').parentPort.postMessage(monoMs()))`, {
    eval: true,
  })
  const before = monoMs()
  const stamp = await new Promise<number>((resolve) => worker.once('message', resolve))
  const after = monoMs()
  await worker.terminate()
  expect(stamp).toBeGreaterThanOrEqual(before)
  expect(stamp).toBeLessThanOrEqual(after)
})
