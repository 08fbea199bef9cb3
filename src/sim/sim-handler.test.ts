import { describe, expect, test } from 'vitest'
import { memoryExchange } from '../../fixtures/memory-exchange.ts'
import { SimHandler } from './sim-handler.ts'
import { resolveSimOptions, type SimOptions } from './sim-options.ts'

const handlerOf = (options: SimOptions = {}): SimHandler =>
  new SimHandler(resolveSimOptions({ model: 'm', decodeTokPerS: 10_000, prefillTokPerS: 1_000_000, ...options }))

async function exchange(handler: SimHandler, method: string, url: string, body?: unknown): Promise<string> {
  const x = memoryExchange(method, url, body === undefined ? undefined : JSON.stringify(body))
  handler.request(x.req, x.res)
  await x.finished
  return x.written()
}

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'm',
  messages: [{ role: 'user', content: 'one two three' }],
  max_tokens: 4,
  stream: true,
  ...extra,
})

describe('SimHandler', () => {
  test('routes: health, models, an unknown path and a wrong method', async () => {
    const handler = handlerOf()
    expect(await exchange(handler, 'GET', '/health')).toMatch(/^HTTP\/1\.1 200 OK/)
    const models = await exchange(handler, 'GET', '/v1/models')
    expect(models).toContain('"id":"m"')
    expect(await exchange(handler, 'GET', '/nope')).toMatch(/^HTTP\/1\.1 404[\s\S]*no route GET \/nope/)
    expect(await exchange(handler, 'GET', '/v1/chat/completions')).toMatch(/^HTTP\/1\.1 405[\s\S]*takes POST, not GET/)
    handler.close()
  })

  test('streams an accepted completion to [DONE] and counts it clean; /metrics reports its tokens', async () => {
    const handler = handlerOf()
    const stream = await exchange(handler, 'POST', '/v1/chat/completions', chat())
    expect(stream).toMatch(/^HTTP\/1\.1 200 OK/)
    expect(stream).toContain('data: [DONE]')
    expect(handler.stats()).toMatchObject({ requests: 1, active: 0, maxActive: 1, cleanCompletions: 1 })
    const metrics = await exchange(handler, 'GET', '/metrics')
    expect(metrics).toContain('vllm:generation_tokens_total{model_name="m"} 4')
    handler.close()
  })

  test('refuses what it would never serve with the engine’s 400s, before counting it', async () => {
    const handler = handlerOf({ maxModelLen: 16 })
    expect(await exchange(handler, 'POST', '/v1/chat/completions', chat({ stream: false }))).toMatch(
      /^HTTP\/1\.1 400[\s\S]*streaming requests only/,
    )
    expect(await exchange(handler, 'POST', '/v1/chat/completions', chat({ max_tokens: 100 }))).toMatch(
      /maximum context length is 16 tokens/,
    )
    expect(await exchange(handler, 'POST', '/v1/chat/completions', chat({ model: 'other' }))).toMatch(
      /^HTTP\/1\.1 404[\s\S]*does not exist/,
    )
    expect(await exchange(handler, 'POST', '/v1/chat/completions', '{')).toMatch(/^HTTP\/1\.1 400/)
    expect(handler.stats().requests).toBe(0)
    handler.close()
  })

  test('a planned http429 answers with Retry-After and counts as injected', async () => {
    const handler = handlerOf({ faults: [{ kind: 'http429', requests: [0] }] })
    expect(await exchange(handler, 'POST', '/v1/chat/completions', chat())).toMatch(/^HTTP\/1\.1 429[\s\S]*retry-after: 2/i)
    expect(handler.stats()).toMatchObject({ requests: 1, faultsInjected: { http429: 1 }, cleanCompletions: 0 })
    handler.close()
  })

  test('tokenizes, and counts each call', async () => {
    const handler = handlerOf()
    expect(await exchange(handler, 'POST', '/tokenize', { model: 'm', prompt: 'a b c' })).toContain('"count":3')
    expect(handler.stats().tokenizeRequests).toBe(1)
    handler.close()
  })

  test('a client that goes away mid-stream leaves the engine: its stream ends, counted unclean', async () => {
    const handler = handlerOf({ decodeTokPerS: 20 })
    const x = memoryExchange('POST', '/v1/chat/completions', JSON.stringify(chat({ max_tokens: 100 })))
    handler.request(x.req, x.res)
    await new Promise((resolve) => setTimeout(resolve, 120))
    expect(handler.stats().active).toBe(1)
    x.res.destroy()
    await x.finished
    expect(handler.stats()).toMatchObject({ requests: 1, active: 0, cleanCompletions: 0 })
    handler.close()
  })

  test('after close, a completion is not served', async () => {
    const handler = handlerOf()
    handler.close()
    const x = memoryExchange('POST', '/v1/chat/completions', JSON.stringify(chat()))
    handler.request(x.req, x.res)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(x.written()).toBe('')
    expect(handler.stats().requests).toBe(0)
  })
})
