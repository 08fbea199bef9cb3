import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, expect, test } from 'vitest'
import { runCell } from './measure-cell.ts'

let server: Server
afterAll(async () => {
  server.closeAllConnections()
  await new Promise((r) => server.close(r))
})

test('a cell aborted while the engine never answers its /tokenize probe ends at once, not at the probe timeout', async () => {
  let tokenizeCalls = 0
  server = createServer((req, res) => {
    req.resume()
    if (req.url === '/v1/models') res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[{"id":"m"}]}')
    // Never answered: the usage check's probe would wait out its 10 s timeout.
    else if (req.url === '/tokenize') tokenizeCalls++
    else res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const stop = new AbortController()
  const started = performance.now()
  setTimeout(() => stop.abort(), 300)
  const record = await runCell(
    { baseUrl: url, model: 'm', requests: 2, calibrate: false, workload: { promptTokens: 16 } },
    { signal: stop.signal },
  )
  expect(performance.now() - started).toBeLessThan(3_000)
  // The probe went out once for the cell; nothing was measured after the abort.
  expect(tokenizeCalls).toBe(1)
  expect(record.completed).toBe(0)
  expect(record.plan.usageCheck?.tokenizer).toBeNull()
})
