import { afterEach, describe, expect, test } from 'vitest'
import { ServegateError } from '../errors.ts'
import { startSimServer, type SimServer } from './server.ts'
import type { SimOptions } from './sim-options.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function sim(options: SimOptions = {}): Promise<SimServer> {
  const server = await startSimServer({ decodeTokPerS: 1000, ...options })
  servers.push(server)
  return server
}

/** A system prompt of `words` four-letter words: one sim token each. */
const system = (words: number): string => Array.from({ length: words }, (_, i) => `w${String(i % 1000).padStart(3, '0')}`).join(' ')

const chat = (systemText: string, question: string) => ({
  messages: [
    { role: 'system', content: systemText },
    { role: 'user', content: question },
  ],
  max_tokens: 2,
  stream: true,
  stream_options: { include_usage: true },
})

interface Usage {
  prompt_tokens: number
  prompt_tokens_details?: { cached_tokens: number }
}

/** Sends one streaming request; its usage and time to the first content token, ms. */
async function send(server: SimServer, body: unknown): Promise<{ usage: Usage; ttftMs: number }> {
  const started = performance.now()
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body) })
  let text = ''
  let ttftMs = Number.NaN
  const decoder = new TextDecoder()
  for await (const bytes of res.body ?? []) {
    text += decoder.decode(bytes, { stream: true })
    if (Number.isNaN(ttftMs) && text.includes('"content":" ')) ttftMs = performance.now() - started
  }
  const usageLine = text.split('\n\n').find((event) => event.includes('"usage"'))
  if (usageLine === undefined) throw new Error(`no usage in ${text}`)
  return { usage: (JSON.parse(usageLine.slice('data: '.length)) as { usage: Usage }).usage, ttftMs }
}

async function request(server: SimServer, method: string, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${server.url}${path}`, { method })
  return { status: res.status, body: await res.text() }
}

async function metric(server: SimServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
  if (line === undefined) throw new Error(`no ${name} in\n${text}`)
  return Number(line.split(' ').at(-1))
}

describe('the simulated engine’s prefix cache', () => {
  test('a shared system prompt hits the cache: cached_tokens reported, prefill paid only for the rest', async () => {
    // 4000 tokens at 20000 tok/s: 200 ms of prefill cold.
    const server = await sim({ prefixCacheTokens: 65_536, prefillTokPerS: 20_000 })
    const prompt = system(4000)
    const cold = await send(server, chat(prompt, 'first question'))
    const warm = await send(server, chat(prompt, 'second question'))
    expect(cold.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 })
    // The system message's template and text are whole 16-token blocks up to the first block that holds the question.
    const cached = warm.usage.prompt_tokens_details?.cached_tokens ?? 0
    expect(cached % 16).toBe(0)
    expect(cached).toBeGreaterThanOrEqual(4000)
    expect(cached).toBeLessThan(warm.usage.prompt_tokens)
    expect(cold.ttftMs).toBeGreaterThan(180)
    expect(warm.ttftMs).toBeLessThan(cold.ttftMs / 2)
    expect(await metric(server, 'vllm:prefix_cache_queries_total')).toBe(cold.usage.prompt_tokens + warm.usage.prompt_tokens)
    expect(await metric(server, 'vllm:prefix_cache_hits_total')).toBe(cached)
  })

  test('a reply is cached after its prompt, as an engine caches what it generated: a live next turn finds both', async () => {
    const server = await sim({ prefixCacheTokens: 65_536, prefillTokPerS: 1_000_000, prefixBlockTokens: 4 })
    const turn1 = { ...chat(system(200), 'first question'), max_tokens: 40 }
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(turn1) })
    const reply = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '')
      .join('')
    expect(reply.split(' ').length).toBeGreaterThan(30)
    const turn2 = chat(system(200), 'first question')
    turn2.messages.push({ role: 'assistant', content: reply }, { role: 'user', content: 'and then' })
    const { usage } = await send(server, turn2)
    // Two messages (4 template tokens each), 200 system tokens, 'firs t ques tion', the generation prompt.
    const turn1Tokens = 4 + 200 + 4 + 4 + 3
    // Past the first prompt and into the reply: only the reply's last block (and what follows it) is computed.
    expect(usage.prompt_tokens_details?.cached_tokens).toBeGreaterThan(turn1Tokens + 30)
  })

  test('off by default: no cached_tokens, full prefill each time; the counters still count the queries at 0 hits', async () => {
    const server = await sim({ prefillTokPerS: 1_000_000 })
    const prompt = system(200)
    await send(server, chat(prompt, 'one'))
    const again = await send(server, chat(prompt, 'two'))
    expect(again.usage.prompt_tokens_details).toBeUndefined()
    expect(await metric(server, 'vllm:prefix_cache_hits_total')).toBe(0)
  })

  test('reportCachedTokens: false hides the figure but the cache still serves', async () => {
    const server = await sim({ prefixCacheTokens: 8192, reportCachedTokens: false, prefillTokPerS: 1_000_000 })
    const prompt = system(200)
    await send(server, chat(prompt, 'one'))
    const again = await send(server, chat(prompt, 'two'))
    expect(again.usage.prompt_tokens_details).toBeUndefined()
    expect(await metric(server, 'vllm:prefix_cache_hits_total')).toBeGreaterThan(0)
  })

  test('SGLang dialect: its cache_hit_rate gauge', async () => {
    const server = await sim({ dialect: 'sglang', prefixCacheTokens: 8192, prefillTokPerS: 1_000_000 })
    const prompt = system(200)
    const first = await send(server, chat(prompt, 'one'))
    const second = await send(server, chat(prompt, 'two'))
    const hits = second.usage.prompt_tokens_details?.cached_tokens ?? 0
    expect(await metric(server, 'sglang:cache_hit_rate')).toBeCloseTo(hits / (first.usage.prompt_tokens + second.usage.prompt_tokens), 12)
  })

  test('an impossible capacity fails at once, naming the option and the fix', async () => {
    await expect(startSimServer({ prefixCacheTokens: 8, prefixBlockTokens: 16 })).rejects.toThrow(ServegateError)
    await expect(startSimServer({ prefixCacheTokens: 8, prefixBlockTokens: 16 })).rejects.toThrow(
      /prefixCacheTokens: holds no whole block of prefixBlockTokens \(got 8\); use 0 \(no prefix cache\) or an integer >= prefixBlockTokens/,
    )
  })
})

describe('resetting the prefix cache, as each engine offers it', () => {
  const warmThenReset = async (options: SimOptions, reset: (server: SimServer) => Promise<{ status: number; body: string }>) => {
    const server = await sim({ prefixCacheTokens: 8192, prefillTokPerS: 1_000_000, ...options })
    const prompt = system(200)
    await send(server, chat(prompt, 'one'))
    const answer = await reset(server)
    const after = await send(server, chat(prompt, 'two'))
    return { answer, cachedAfter: after.usage.prompt_tokens_details?.cached_tokens ?? null, server }
  }

  test('vLLM: POST /reset_prefix_cache answers 200 with no body and empties it; 404 without it (no VLLM_SERVER_DEV_MODE)', async () => {
    const on = await warmThenReset({}, (server) => request(server, 'POST', '/reset_prefix_cache'))
    expect(on.answer).toEqual({ status: 200, body: '' })
    expect(on.cachedAfter).toBe(0)
    const off = await warmThenReset({ cacheReset: false }, (server) => request(server, 'POST', '/reset_prefix_cache'))
    expect(off.answer.status).toBe(404)
    expect(off.cachedAfter).toBeGreaterThan(0)
  })

  test('SGLang: /flush_cache empties it; other dialects do not serve it', async () => {
    const flushed = await warmThenReset({ dialect: 'sglang' }, (server) => request(server, 'POST', '/flush_cache'))
    expect(flushed.answer).toMatchObject({ status: 200, body: expect.stringMatching(/^Cache flushed\./) })
    expect(flushed.cachedAfter).toBe(0)
    const vllm = await sim({ prefixCacheTokens: 8192 })
    expect((await request(vllm, 'POST', '/flush_cache')).status).toBe(404)
  })

  test('llama-server: GET /slots lists them; POST /slots/{id}?action=erase empties it, 501 without --slot-save-path', async () => {
    const erased = await warmThenReset({ dialect: 'llama-server', maxBatch: 2 }, async (server) => {
      const slots = JSON.parse((await request(server, 'GET', '/slots')).body) as Array<{ id: number }>
      expect(slots.map((s) => s.id)).toEqual([0, 1])
      return request(server, 'POST', '/slots/1?action=erase')
    })
    expect(erased.answer.status).toBe(200)
    expect(JSON.parse(erased.answer.body)).toMatchObject({ id_slot: 1, n_erased: expect.any(Number) })
    expect(erased.cachedAfter).toBe(0)
    expect(await request(erased.server, 'POST', '/slots/0?action=save')).toMatchObject({
      status: 400,
      body: expect.stringContaining('Invalid action'),
    })
    expect(await request(erased.server, 'POST', '/slots/7?action=erase')).toMatchObject({
      status: 400,
      body: expect.stringContaining('Invalid slot ID'),
    })

    const refused = await warmThenReset({ dialect: 'llama-server', cacheReset: false }, (server) =>
      request(server, 'POST', '/slots/0?action=erase'),
    )
    expect(refused.answer.status).toBe(501)
    expect(JSON.parse(refused.answer.body)).toEqual({
      error: {
        code: 501,
        message: 'This server does not support slots action. Start it with `--slot-save-path`',
        type: 'not_supported_error',
      },
    })
    expect(refused.cachedAfter).toBeGreaterThan(0)
  })
})
