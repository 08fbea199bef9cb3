/**
 * The real llama-server (built by `npm run build:llama-server`) serving the tiny model: pins the
 * facts that fixtures/models/README.md records for the llama-server adapter. Skipped when the
 * binary is not built; CI builds it first (.ci/run).
 */
import { join } from 'node:path'
import { execa, type ResultPromise } from 'execa'
import { afterAll, describe, expect } from 'vitest'
import { test } from '../fixtures/test-context.ts'
import { llamaServerPath } from './build-llama-server.ts'
import { writeTinyGguf } from './make-tiny-gguf.ts'

const binary = await llamaServerPath()
const READY = /listening on (http:\/\/\S+)/
const EOS_ID = 2

type ChatChunk = {
  choices: { delta: { content?: string | null }; finish_reason: string | null }[]
  usage?: { prompt_tokens: number; completion_tokens: number }
  timings?: { cache_n: number; prompt_n: number; prompt_ms: number; predicted_n: number; predicted_ms: number }
}

/** The `data:` payloads of an SSE body, without the final `[DONE]`. */
function sseData(body: string): string[] {
  return body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => line.slice('data: '.length))
}

describe.skipIf(binary === null)('llama-server with the tiny model', () => {
  let server: ResultPromise<{ reject: false; buffer: false }>
  let base: string

  const post = async (path: string, body: unknown) => {
    const response = await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    return { status: response.status, text: await response.text() }
  }

  test.beforeAll(async ({ tmpDir }) => {
    const model = await writeTinyGguf(join(tmpDir, 'tiny.gguf'))
    server = execa(binary!, ['-m', model.path, '--host', '127.0.0.1', '--port', '0', '-t', '1', '-c', '4096', '-np', '2', '--metrics'], {
      reject: false,
      buffer: false,
    })
    base = await new Promise<string>((resolve, reject) => {
      let log = ''
      server.stderr.on('data', (chunk: Buffer) => {
        log += chunk.toString()
        const match = READY.exec(log)
        if (match?.[1]) resolve(match[1])
      })
      void server.then((result) => reject(new Error(`llama-server exited (${result.exitCode}) before listening:\n${log.slice(-2000)}`)))
    })
  })

  afterAll(async () => {
    server?.kill('SIGTERM')
    await server
  })

  test('is healthy once it logs "listening on"', async () => {
    const response = await fetch(`${base}/health`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
  })

  test('/tokenize and /apply-template use the model tokenizer and its ChatML template', async () => {
    const tokenized = JSON.parse((await post('/tokenize', { content: 'Write the first story about the water' })).text) as {
      tokens: number[]
    }
    expect(tokenized.tokens.length).toBeGreaterThan(7)
    const applied = JSON.parse((await post('/apply-template', { messages: [{ role: 'user', content: 'Hello' }] })).text) as {
      prompt: string
    }
    expect(applied.prompt).toBe('<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n')
  })

  test('streams one non-empty delta per token, then usage and timings', async () => {
    const { status, text } = await post('/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Write the first story about the water of the old river.' }],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 16,
    })
    expect(status).toBe(200)
    const data = sseData(text)
    expect(data.at(-1)).toBe('[DONE]')
    const chunks = data.slice(0, -1).map((payload) => JSON.parse(payload) as ChatChunk)
    const contents = chunks
      .flatMap((chunk) => chunk.choices.map((choice) => choice.delta.content))
      .filter((content) => typeof content === 'string')
    expect(contents).toHaveLength(16)
    for (const content of contents) expect(content).toMatch(/^ [A-Za-z]+$/)
    expect(chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.finish_reason)).filter(Boolean)).toEqual(['length'])
    const last = chunks.at(-1)!
    expect(last.choices).toEqual([])
    expect(last.usage?.completion_tokens).toBe(16)
    expect(last.timings?.predicted_n).toBe(16)
    expect(last.timings!.prompt_n + last.timings!.cache_n).toBe(last.usage?.prompt_tokens)
  })

  test('per-request ignore_eos keeps generating past a forced EOS', async () => {
    const request = (ignoreEos: boolean) =>
      post('/v1/chat/completions', {
        messages: [{ role: 'user', content: 'Hi' }],
        max_tokens: 8,
        logit_bias: { [EOS_ID]: 100 },
        ignore_eos: ignoreEos,
      })
    const stopped = JSON.parse((await request(false)).text) as {
      choices: { finish_reason: string }[]
      usage: { completion_tokens: number }
    }
    expect(stopped.choices[0]?.finish_reason).toBe('stop')
    const ignored = JSON.parse((await request(true)).text) as typeof stopped
    expect(ignored.choices[0]?.finish_reason).toBe('length')
    expect(ignored.usage.completion_tokens).toBe(8)
  })

  test('/metrics exposes the llamacpp: counters and gauges', async () => {
    const response = await fetch(`${base}/metrics`)
    expect(response.status).toBe(200)
    const names = [...(await response.text()).matchAll(/^(llamacpp:\w+) /gm)].map((match) => match[1])
    expect(names).toEqual(
      expect.arrayContaining([
        'llamacpp:prompt_tokens_total',
        'llamacpp:tokens_predicted_total',
        'llamacpp:requests_processing',
        'llamacpp:requests_deferred',
      ]),
    )
  })
})
