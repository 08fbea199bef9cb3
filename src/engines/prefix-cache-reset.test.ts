import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, test } from 'vitest'
import { startSimServer, type SimServer } from '../sim/server.ts'
import type { SimOptions } from '../sim/sim-options.ts'
import { resetPrefixCache } from './prefix-cache-reset.ts'

const open: Array<{ close(): Promise<void> | void }> = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()))
})

async function sim(options: SimOptions): Promise<SimServer> {
  const server = await startSimServer({ prefixCacheTokens: 4096, ...options })
  open.push(server)
  return server
}

/** A loopback server answering each path with its status and body, any other with a 404. */
async function answering(routes: Record<string, [number, string]> = {}): Promise<string> {
  const server: Server = createServer((req, res) => {
    const [status, body] = routes[req.url ?? ''] ?? [404, '{"detail":"Not Found"}']
    res.writeHead(status).end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  open.push({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** Sends a request that warms the sim's cache; the check whether a second one still hits it. */
async function stillCached(server: SimServer): Promise<() => Promise<boolean>> {
  const body = (q: string) =>
    JSON.stringify({
      messages: [
        { role: 'system', content: Array.from({ length: 64 }, (_, i) => `w${i}`).join(' ') },
        { role: 'user', content: q },
      ],
      max_tokens: 1,
      stream: true,
      stream_options: { include_usage: true },
    })
  const send = async (q: string) => (await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: body(q) })).text()
  const text = await send('one')
  expect(text).toContain('"cached_tokens":0')
  return async () => /"cached_tokens":[1-9]/.test(await send('two'))
}

describe('resetPrefixCache', () => {
  test('vLLM: POST /reset_prefix_cache empties it', async () => {
    const server = await sim({ dialect: 'vllm' })
    const check = await stillCached(server)
    const result = await resetPrefixCache({ kind: 'vllm', baseUrl: server.url, argv: null })
    expect(result).toEqual({ status: 'reset', endpoints: ['POST /reset_prefix_cache'], reason: null })
    expect(await check()).toBe(false)
  })

  test('vLLM without VLLM_SERVER_DEV_MODE: not offered, saying how to offer it', async () => {
    const server = await sim({ dialect: 'vllm', cacheReset: false })
    const result = await resetPrefixCache({ kind: 'vllm', baseUrl: server.url, argv: null })
    expect(result).toMatchObject({ status: 'not-offered', endpoints: ['POST /reset_prefix_cache'] })
    expect(result.reason).toMatch(/HTTP 404.*VLLM_SERVER_DEV_MODE=1/)
  })

  test('SGLang: its /reset_prefix_cache is missing on these releases, so /flush_cache', async () => {
    const server = await sim({ dialect: 'sglang' })
    const check = await stillCached(server)
    const result = await resetPrefixCache({ kind: 'sglang', baseUrl: server.url, argv: null })
    expect(result).toEqual({ status: 'reset', endpoints: ['POST /reset_prefix_cache', 'POST /flush_cache'], reason: null })
    expect(await check()).toBe(false)
  })

  test('SGLang refusing to flush (requests running) is a failure with its answer', async () => {
    const refusal = 'Cache flushed.\n(When there are running or waiting requests, the operation will not be performed.)\n'
    const url = await answering({ '/flush_cache': [400, refusal] })
    const result = await resetPrefixCache({ kind: 'sglang', baseUrl: url, argv: null })
    expect(result).toMatchObject({ status: 'failed', endpoints: ['POST /reset_prefix_cache', 'POST /flush_cache'] })
    expect(result.reason).toMatch(/^POST \/flush_cache: HTTP 400: Cache flushed\. \(When there are running/)
  })

  test('llama-server: every slot erased; partial while its host-memory prompt cache is on, reset with --cache-ram 0', async () => {
    const server = await sim({ dialect: 'llama-server', maxBatch: 2 })
    const check = await stillCached(server)
    const partial = await resetPrefixCache({ kind: 'llama-server', baseUrl: server.url, argv: ['llama-server', '-np', '2'] })
    expect(partial).toMatchObject({
      status: 'partial',
      endpoints: ['GET /slots', 'POST /slots/0?action=erase', 'POST /slots/1?action=erase'],
      reason: expect.stringMatching(/--cache-ram 0/),
    })
    expect(await check()).toBe(false)
    const full = await resetPrefixCache({ kind: 'llama-server', baseUrl: server.url, argv: ['llama-server', '--cache-ram', '0'] })
    expect(full.status).toBe('reset')
  })

  test('llama-server without --slot-save-path: not offered, saying so', async () => {
    const server = await sim({ dialect: 'llama-server', cacheReset: false })
    const result = await resetPrefixCache({ kind: 'llama-server', baseUrl: server.url, argv: null })
    expect(result).toMatchObject({ status: 'not-offered', endpoints: ['GET /slots', 'POST /slots/0?action=erase'] })
    expect(result.reason).toMatch(/HTTP 501.*--slot-save-path/)
  })

  test('TensorRT-LLM offers none; nothing is called', async () => {
    const result = await resetPrefixCache({ kind: 'trtllm', baseUrl: 'http://127.0.0.1:1', argv: null })
    expect(result).toMatchObject({ status: 'not-offered', endpoints: [] })
  })

  test('a command or external engine: whichever reset it answers', async () => {
    for (const dialect of ['vllm', 'sglang', 'llama-server'] as const) {
      const server = await sim({ dialect })
      const check = await stillCached(server)
      const result = await resetPrefixCache({ kind: 'command', baseUrl: server.url, argv: null })
      expect(['reset', 'partial']).toContain(result.status)
      expect(await check()).toBe(false)
    }
    const none = await resetPrefixCache({ kind: 'external', baseUrl: await answering(), argv: null })
    expect(none).toMatchObject({ status: 'not-offered', endpoints: ['POST /reset_prefix_cache', 'POST /flush_cache', 'GET /slots'] })
    expect(none.reason).toMatch(/answers none of/)
  })

  test('an engine that is gone: a failure with the network error, never a throw', async () => {
    const result = await resetPrefixCache({ kind: 'vllm', baseUrl: 'http://127.0.0.1:1', argv: null })
    expect(result.status).toBe('failed')
    expect(result.reason).toMatch(/no answer/)
  })
})
