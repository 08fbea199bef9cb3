import { connect } from 'node:net'
import { afterEach, describe, expect, test } from 'vitest'
import { ServegateError } from '../errors.ts'
import type { SimOptions } from './sim-options.ts'
import { startSimServer, type SimServer } from './server.ts'

const servers: SimServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function sim(options: SimOptions = {}): Promise<SimServer> {
  const server = await startSimServer({ prefillTokPerS: 1_000_000, decodeTokPerS: 1000, ...options })
  servers.push(server)
  return server
}

const chat = (body: Record<string, unknown> = {}) => ({
  messages: [{ role: 'user', content: 'say hello' }],
  max_tokens: 6,
  stream: true,
  stream_options: { include_usage: true },
  ...body,
})

const completion = (body: Record<string, unknown> = {}) => ({
  prompt: 'one two three',
  max_tokens: 6,
  stream: true,
  stream_options: { include_usage: true },
  ...body,
})

interface Received {
  status: number
  headers: Headers
  text: string
  /** Milliseconds from send to the end of the body (or to its failure). */
  e2eMs: number
  /** Set when reading the body failed (a dropped or aborted stream). */
  error: unknown
}

async function post(
  server: SimServer,
  path: string,
  body: unknown,
  options: { signal?: AbortSignal; onText?: (text: string) => void } = {},
): Promise<Received> {
  const started = performance.now()
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: options.signal,
  })
  let text = ''
  let error: unknown = null
  const decoder = new TextDecoder()
  try {
    for await (const bytes of res.body ?? []) {
      text += decoder.decode(bytes, { stream: true })
      options.onText?.(text)
    }
  } catch (caught) {
    error = caught
  }
  return { status: res.status, headers: res.headers, text, e2eMs: performance.now() - started, error }
}

/** The payloads of the `data:` events, keep-alive comments left out. */
function dataEvents(text: string): string[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length))
}

interface Chunk {
  object: string
  choices: Array<{
    delta?: { role?: string; content?: string; reasoning_content?: string }
    text?: string
    finish_reason: string | null
  }>
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
}

function chunks(text: string): Chunk[] {
  return dataEvents(text)
    .filter((data) => data !== '[DONE]')
    .map((data) => JSON.parse(data) as Chunk)
}

const words = (text: string) => text.split(' ').filter(Boolean).length

describe('stream format', () => {
  test('chat: role chunk, reasoning before content, tokens per chunk, usage, [DONE]', async () => {
    const server = await sim({ reasoningTokens: 3, tokensPerChunk: 2 })
    const res = await post(server, '/v1/chat/completions', chat({ max_tokens: 8 }))

    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/event-stream')
    expect(res.headers.get('content-length')).toBeNull()
    expect(res.headers.get('transfer-encoding')).toBe('chunked')
    const events = dataEvents(res.text)
    expect(events[0]).toMatch(
      new RegExp(
        /^\{"id":"chatcmpl-[0-9a-f]+","object":"chat\.completion\.chunk","created":\d+,"model":"sim-model",/.source +
          /"choices":\[\{"index":0,"delta":\{"role":"assistant","content":""\},"logprobs":null,"finish_reason":null\}\]\}$/.source,
      ),
    )
    expect(events.at(-1)).toBe('[DONE]')
    expect(res.text.endsWith('data: [DONE]\n\n')).toBe(true)

    const [, ...rest] = chunks(res.text)
    const usageChunk = rest.pop()
    const deltas = rest.map((chunk) => chunk.choices[0]?.delta ?? {})
    // 3 reasoning tokens in chunks of 2 (the boundary flushes the third), then 5 content tokens.
    expect(deltas.map((delta) => words(delta.reasoning_content ?? '') + words(delta.content ?? ''))).toEqual([2, 1, 2, 2, 1])
    expect(deltas.slice(0, 2).every((delta) => delta.reasoning_content && delta.content === undefined)).toBe(true)
    expect(deltas.slice(2).every((delta) => delta.content && delta.reasoning_content === undefined)).toBe(true)
    expect(deltas.every((delta) => /^( \w+)+$/.test(delta.reasoning_content ?? delta.content ?? ''))).toBe(true)
    expect(rest.map((chunk) => chunk.choices[0]?.finish_reason)).toEqual([null, null, null, null, 'length'])
    expect(usageChunk).toMatchObject({ object: 'chat.completion.chunk', choices: [] })
    expect(usageChunk?.usage).toEqual({ prompt_tokens: 10, completion_tokens: 8, total_tokens: 18 })
  })

  test('completions: text chunks without a role chunk, natural stop before max_tokens', async () => {
    const server = await sim({ outputTokens: 3, reasoningTokens: 2 })
    const res = await post(server, '/v1/completions', completion({ max_tokens: 10 }))

    expect(res.status).toBe(200)
    const all = chunks(res.text)
    const texts = all.slice(0, -1)
    expect(texts.every((chunk) => chunk.object === 'text_completion')).toBe(true)
    expect(texts.map((chunk) => words(chunk.choices[0]?.text ?? ''))).toEqual([1, 1, 1])
    expect(texts.map((chunk) => chunk.choices[0]?.finish_reason)).toEqual([null, null, 'stop'])
    expect(all.at(-1)?.usage).toEqual({ prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 })
    expect(dataEvents(res.text).at(-1)).toBe('[DONE]')
  })

  test('no usage chunk unless stream_options.include_usage', async () => {
    const server = await sim()
    const res = await post(server, '/v1/chat/completions', chat({ stream_options: undefined }))
    expect(chunks(res.text).some((chunk) => chunk.usage)).toBe(false)
    expect(dataEvents(res.text).at(-1)).toBe('[DONE]')
  })

  test('prompt_tokens counts ≤4-character word pieces of every message, string or text parts, plus the chat template', async () => {
    const server = await sim()
    const messages = [
      { role: 'system', content: 'you are  terse' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'read this chart' },
          { type: 'image_url', image_url: { url: 'data:,' } },
        ],
      },
      { role: 'assistant', content: null },
      { role: 'user', content: '\nand answer\tnow ' },
    ]
    const chatRes = await post(server, '/v1/chat/completions', chat({ messages, max_tokens: 1 }))
    // you are ters e | read this char t | (null) | and answ er now → 12 pieces; 4 messages × 4 + 3 template tokens.
    expect(chunks(chatRes.text).at(-1)?.usage?.prompt_tokens).toBe(12 + 16 + 3)
    const completionRes = await post(server, '/v1/completions', completion({ prompt: ' a b\n c ', max_tokens: 1 }))
    expect(chunks(completionRes.text).at(-1)?.usage?.prompt_tokens).toBe(3)
  })

  test('the same request seed gives the same words; max_completion_tokens bounds chat output', async () => {
    const server = await sim()
    const text = async () => {
      const res = await post(server, '/v1/chat/completions', chat({ seed: 42, max_tokens: 100, max_completion_tokens: 12 }))
      return chunks(res.text)
        .map((chunk) => chunk.choices[0]?.delta?.content ?? '')
        .join('')
    }
    const first = await text()
    expect(words(first)).toBe(12)
    expect(await text()).toBe(first)
  })

  test('ignore_eos generates max_tokens; min_tokens raises the natural length', async () => {
    const server = await sim({ outputTokens: 2 })
    const usage = async (body: Record<string, unknown>) =>
      chunks((await post(server, '/v1/completions', completion(body))).text).at(-1)?.usage?.completion_tokens
    expect(await usage({ max_tokens: 5 })).toBe(2)
    expect(await usage({ max_tokens: 5, ignore_eos: true })).toBe(5)
    expect(await usage({ max_tokens: 5, min_tokens: 4 })).toBe(4)
  })

  test('keep-alive comments while a stream waits, and CRLF line endings', async () => {
    const server = await sim({ keepaliveMs: 10, crlf: true, prefillTokPerS: 100 })
    const res = await post(server, '/v1/completions', completion({ prompt: 'w '.repeat(10), max_tokens: 2 }))
    expect(res.text).toContain(': keep-alive\r\n\r\n')
    expect(res.text.replaceAll('\r\n', '')).not.toContain('\n')
    expect(res.text.endsWith('data: [DONE]\r\n\r\n')).toBe(true)
  })
})

describe('timing model', () => {
  test('decode follows decodeTokPerS at concurrency 1', async () => {
    const server = await sim({ decodeTokPerS: 200 })
    const res = await post(server, '/v1/completions', completion({ max_tokens: 40 }))
    expect(chunks(res.text).at(-1)?.usage?.completion_tokens).toBe(40)
    // 39 decode steps of 5 ms after the first token; loose bounds for a shared 2-core machine.
    expect(res.e2eMs).toBeGreaterThan(150)
    expect(res.e2eMs).toBeLessThan(600)
  })

  test('four streams in one batch each run slower than one alone', async () => {
    const server = await sim({ decodeTokPerS: 200, batchSlowdown: 0.5 })
    const alone = await post(server, '/v1/completions', completion({ max_tokens: 40 }))
    const together = await Promise.all(Array.from({ length: 4 }, () => post(server, '/v1/completions', completion({ max_tokens: 40 }))))
    // Each step takes 1 + 0.5·3 = 2.5× as long with four streams in the batch.
    for (const res of together) expect(res.e2eMs / alone.e2eMs).toBeGreaterThan(1.6)
    expect(server.stats()).toMatchObject({ maxRunning: 4, maxActive: 4, active: 0, requests: 5 })
  })

  test('the prefill lane is FIFO: a second prompt waits for the first', async () => {
    const server = await sim({ prefillTokPerS: 1000 })
    const prompt = 'w '.repeat(100)
    const [first, second] = await Promise.all([
      post(server, '/v1/completions', completion({ prompt, max_tokens: 1 })),
      post(server, '/v1/completions', completion({ prompt, max_tokens: 1 })),
    ])
    expect(first?.e2eMs).toBeGreaterThan(90)
    expect(second?.e2eMs).toBeGreaterThan(180)
  })

  test('a client that goes away frees its batch slot', async () => {
    const server = await sim({ decodeTokPerS: 100 })
    const controller = new AbortController()
    const res = await post(server, '/v1/chat/completions', chat({ max_tokens: 1000 }), {
      signal: controller.signal,
      onText: (text) => {
        if (chunks(text).length >= 3) controller.abort()
      },
    })
    expect(res.error).toBeTruthy()
    await expect.poll(() => server.stats().active).toBe(0)
    expect(server.stats().maxRunning).toBe(1)
  })
})

describe('faults', () => {
  test('http500 answers a JSON error; the next request is served', async () => {
    const server = await sim({ faults: [{ kind: 'http500', requests: [0] }] })
    const failed = await post(server, '/v1/chat/completions', chat())
    expect(failed.status).toBe(500)
    expect(JSON.parse(failed.text)).toMatchObject({ error: { type: 'InternalServerError', code: 500 } })
    expect((await post(server, '/v1/chat/completions', chat())).status).toBe(200)
    expect(server.stats().faultsInjected).toMatchObject({ http500: 1 })
  })

  test('http429 sends Retry-After: 2 and a JSON error', async () => {
    const server = await sim({ faults: [{ kind: 'http429', requests: [1] }] })
    expect((await post(server, '/v1/completions', completion())).status).toBe(200)
    const limited = await post(server, '/v1/completions', completion())
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('2')
    expect(JSON.parse(limited.text)).toMatchObject({ error: { type: 'RateLimitError', code: 429 } })
  })

  test('drop destroys the socket after half of the tokens, without a finish or [DONE]', async () => {
    const server = await sim({ faults: [{ kind: 'drop', requests: [0] }] })
    const res = await post(server, '/v1/chat/completions', chat({ max_tokens: 10 }))
    expect(res.status).toBe(200)
    expect(res.error).toBeTruthy()
    const content = chunks(res.text).map((chunk) => chunk.choices[0]?.delta?.content ?? '')
    expect(words(content.join(''))).toBe(5)
    expect(chunks(res.text).every((chunk) => chunk.choices[0]?.finish_reason === null)).toBe(true)
    expect(res.text).not.toContain('[DONE]')
    expect(server.stats().active).toBe(0)
  })

  test('malformed sends one invalid data line after a few tokens, then finishes normally', async () => {
    const server = await sim({ faults: [{ kind: 'malformed', requests: [0] }] })
    const res = await post(server, '/v1/completions', completion({ max_tokens: 8 }))
    const events = dataEvents(res.text)
    const bad = events.indexOf('{"choices": [')
    expect(bad).toBe(3)
    const valid = events.filter((event) => event !== '{"choices": [' && event !== '[DONE]').map((e) => JSON.parse(e) as Chunk)
    expect(valid.at(-1)?.usage?.completion_tokens).toBe(8)
    expect(events.at(-1)).toBe('[DONE]')
  })

  test('stall stops sending after a few tokens and keeps the connection open until the client leaves', async () => {
    const server = await sim({ faults: [{ kind: 'stall', requests: [0] }], keepaliveMs: 20 })
    const controller = new AbortController()
    let lastChange = performance.now()
    let seen = ''
    const pending = post(server, '/v1/chat/completions', chat({ max_tokens: 50 }), {
      signal: controller.signal,
      onText: (text) => {
        seen = text
        lastChange = performance.now()
      },
    })
    await expect.poll(() => chunks(seen).length).toBe(4)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(performance.now() - lastChange).toBeGreaterThan(250)
    expect(server.stats().active).toBe(1)
    controller.abort()
    const res = await pending
    expect(res.error).toBeTruthy()
    expect(
      chunks(res.text)
        .slice(1)
        .map((chunk) => words(chunk.choices[0]?.delta?.content ?? '')),
    ).toEqual([1, 1, 1])
    await expect.poll(() => server.stats().active).toBe(0)
  })

  test('empty streams the role chunk, a finish chunk without content, zero usage and [DONE]', async () => {
    const server = await sim({ faults: [{ kind: 'empty', requests: [0] }] })
    const res = await post(server, '/v1/chat/completions', chat())
    expect(res.status).toBe(200)
    const all = chunks(res.text)
    expect(all.map((chunk) => chunk.choices[0] ?? null)).toEqual([
      { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
      { index: 0, delta: {}, logprobs: null, finish_reason: 'stop' },
      null,
    ])
    expect(all.at(-1)?.usage).toEqual({ prompt_tokens: 10, completion_tokens: 0, total_tokens: 10 })
    expect(dataEvents(res.text).at(-1)).toBe('[DONE]')
  })

  test('faultRate draws the same requests for the same seed, taking faultKinds round-robin', async () => {
    const statuses = async () => {
      const server = await sim({ faultRate: 0.5, faultKinds: ['http500', 'http429'], seed: 7 })
      const out: number[] = []
      for (let i = 0; i < 12; i++) out.push((await post(server, '/v1/completions', completion({ max_tokens: 1 }))).status)
      return out
    }
    const first = await statuses()
    expect(await statuses()).toEqual(first)
    const faulted = first.filter((status) => status !== 200)
    expect(faulted.length).toBeGreaterThan(0)
    expect(faulted).toEqual(faulted.map((_, i) => (i % 2 === 0 ? 500 : 429)))
  })
})

describe('errors and endpoints', () => {
  test('a wrong model gets a 404 like vLLM', async () => {
    const server = await sim({ model: 'tiny' })
    const res = await post(server, '/v1/chat/completions', chat({ model: 'other' }))
    expect(res.status).toBe(404)
    expect(JSON.parse(res.text)).toEqual({
      error: { message: 'The model `other` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
    })
    expect((await post(server, '/v1/chat/completions', chat({ model: 'tiny' }))).status).toBe(200)
  })

  test('malformed JSON, a bad field, a non-stream request and an oversized context get a 400', async () => {
    const server = await sim({ maxModelLen: 10 })
    for (const body of ['{"messages": [', chat({ max_tokens: -1 }), chat({ stream: false }), chat({ max_tokens: 9 })]) {
      const res = await post(server, '/v1/chat/completions', body)
      expect(res.status).toBe(400)
      expect(JSON.parse(res.text)).toMatchObject({ error: { type: 'BadRequestError', code: 400 } })
    }
    expect(server.stats().requests).toBe(0)
  })

  test('models, health, tokenize and unknown paths', async () => {
    const server = await sim()
    expect(await (await fetch(`${server.url}/v1/models`)).json()).toMatchObject({
      object: 'list',
      data: [{ id: 'sim-model', object: 'model', owned_by: 'servegate-sim' }],
    })
    expect((await fetch(`${server.url}/health`)).status).toBe(200)
    const tokenized = await post(server, '/tokenize', { prompt: 'three small words' })
    expect(JSON.parse(tokenized.text)).toMatchObject({ count: 6 })
    const chatTokenized = await post(server, '/tokenize', { messages: [{ role: 'user', content: 'three small words' }] })
    expect(JSON.parse(chatTokenized.text)).toMatchObject({ count: 6 + 4 + 3 })
    const missing = await fetch(`${server.url}/v1/nothing`)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toMatchObject({ error: { code: 404 } })
  })

  test('a non-loopback host is rejected with the field and the fix', async () => {
    const attempt = startSimServer({ host: '0.0.0.0' as SimOptions['host'] })
    await expect(attempt).rejects.toBeInstanceOf(ServegateError)
    await expect(attempt).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringMatching(/host: .*127\.0\.0\.1/) })
  })

  test('close() ends open streams and leaves nothing listening', async () => {
    const server = await startSimServer({ faults: [{ kind: 'stall', requests: [0] }] })
    let seen = ''
    const pending = post(server, '/v1/chat/completions', chat(), { onText: (text) => (seen = text) })
    await expect.poll(() => chunks(seen).length).toBeGreaterThan(1)
    await server.close()
    expect((await pending).error).toBeTruthy()
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(server.port, '127.0.0.1')
      socket.on('connect', () => {
        socket.destroy()
        resolve('connected')
      })
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
    })
    expect(refused).toBe('ECONNREFUSED')
  })
})
