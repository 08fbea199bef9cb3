import { afterEach, expect, test } from 'vitest'
import { startWireFaultServer, type WireFault, type WireFaultServer } from '../sim/wire-faults.ts'
import { streamCompletion } from './stream.ts'
import { StreamConnections } from './connections.ts'

let server: WireFaultServer | null = null
afterEach(async () => {
  await server?.close()
  server = null
})

/** Sends `count` requests, one after another on one connection, to a server that answers each with `fault`. */
async function against(fault: WireFault, count = 1) {
  server = await startWireFaultServer(fault)
  const pool = new StreamConnections(server.url, 1)
  try {
    const observations = []
    for (let i = 0; i < count; i++) {
      const body = Buffer.from('{"stream":true}')
      observations.push(await streamCompletion(pool, server.url, { api: 'chat', body, deadlineMs: 10_000 }))
    }
    return { observations, seen: server.requests() }
  } finally {
    await pool.destroy()
  }
}

test('a 200 HTML page is RESPONSE_NOT_STREAM naming its content type and first bytes; sent once', async () => {
  const { observations, seen } = await against('html-page', 3)
  for (const obs of observations) {
    expect(obs.error).toMatchObject({ code: 'RESPONSE_NOT_STREAM', httpStatus: 200 })
    expect(obs.error?.message).toMatch(
      /^HTTP 200 with content-type text\/html; charset=utf-8, not text\/event-stream; it starts: <!DOCTYPE html><html><head><title>Sign in/,
    )
    expect(obs.attempts).toBe(1)
  }
  expect(seen).toBe(3)
})

test('a 200 non-streaming JSON reply is RESPONSE_NOT_STREAM saying the server ignored "stream": true', async () => {
  const { observations, seen } = await against('json-reply')
  expect(observations[0]?.error?.code).toBe('RESPONSE_NOT_STREAM')
  expect(observations[0]?.error?.message).toMatch(
    /^HTTP 200 with content-type application\/json, not text\/event-stream \(a non-streaming reply: the server ignored "stream": true\); it starts: \{"id":"cmpl-1","object":"chat\.completion"/,
  )
  expect(seen).toBe(1)
})

test('a malformed status line is STREAM_PROTOCOL and never sent again: the server saw each request once', async () => {
  const { observations, seen } = await against('malformed-status-line', 5)
  for (const obs of observations) {
    expect(obs.error?.code).toBe('STREAM_PROTOCOL')
    expect(obs.error?.message).toMatch(/^the server's reply is not valid HTTP \(malformed status line\): /)
    expect(obs.attempts).toBe(1)
  }
  expect(seen).toBe(5)
})

test('a 50 MB data line without a line end fails fast with STREAM_PROTOCOL at the 4 MiB cap', async () => {
  const started = performance.now()
  const { observations, seen } = await against('endless-line')
  expect(observations[0]?.error?.code).toBe('STREAM_PROTOCOL')
  expect(observations[0]?.error?.message).toMatch(/^one line exceeds the 4\.0 MiB cap of the SSE parser/)
  expect(performance.now() - started).toBeLessThan(3000)
  expect(seen).toBe(1)
})
