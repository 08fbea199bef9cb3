import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, test } from 'vitest'
import { probeTokenizer } from './tokenize.ts'

const servers: Server[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))))
})

/** A loopback tokenizer that answers like `shape`'s engine and records every body it gets. */
async function tokenizer(
  shape: 'vllm' | 'llama.cpp',
): Promise<{ origin: string; bodies: Array<{ path: string; body: Record<string, unknown> }> }> {
  const bodies: Array<{ path: string; body: Record<string, unknown> }> = []
  const server = createServer((req, res) => {
    let text = ''
    req.on('data', (c: Buffer) => (text += c.toString()))
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>
      bodies.push({ path: req.url ?? '', body })
      const words = (s: string) =>
        s
          .split(/\s+/)
          .filter(Boolean)
          .map(() => 1)
      let answer: unknown
      if (shape === 'vllm' && req.url === '/tokenize') {
        const messages = body.messages as Array<{ content: string }> | undefined
        const thinking = (body.chat_template_kwargs as { enable_thinking?: boolean } | undefined)?.enable_thinking
        const n =
          messages === undefined
            ? words(String(body.prompt)).length
            : words(messages.map((m) => m.content).join(' ')).length + (thinking === false ? 9 : 5)
        answer = { count: n }
      } else if (shape === 'llama.cpp' && req.url === '/tokenize') {
        answer = { tokens: typeof body.content === 'string' ? words(body.content) : [] }
      } else if (shape === 'llama.cpp' && req.url === '/apply-template') {
        answer = { prompt: `<user> ${(body.messages as Array<{ content: string }>).map((m) => m.content).join(' ')} <think> </think>` }
      } else {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies }
}

const noOverhead = async () => null

describe('chat_template_kwargs reach the tokenizer, as the chat requests send them', () => {
  test('vLLM-shape /tokenize with messages: the count is the one the thinking-off template gives', async () => {
    const { origin, bodies } = await tokenizer('vllm')
    const probe = await probeTokenizer(origin, 'm', noOverhead, 5000, { enable_thinking: false })
    expect(probe.warning).toBeNull()
    expect(await probe.tokenizer?.countChat([{ role: 'user', content: 'one two three' }])).toBe(3 + 9)
    const chat = bodies.filter((b) => b.body.messages !== undefined)
    expect(chat.length).toBeGreaterThanOrEqual(2)
    for (const b of chat) expect(b.body.chat_template_kwargs).toEqual({ enable_thinking: false })
    // The text-only probe has no template to apply.
    expect(bodies.find((b) => b.body.prompt !== undefined)?.body.chat_template_kwargs).toBeUndefined()
  })

  test('llama.cpp shape: /apply-template gets them too', async () => {
    const { origin, bodies } = await tokenizer('llama.cpp')
    const probe = await probeTokenizer(origin, 'm', noOverhead, 5000, { enable_thinking: true })
    await probe.tokenizer?.countChat([{ role: 'user', content: 'a b' }])
    const applied = bodies.filter((b) => b.path === '/apply-template')
    expect(applied.length).toBeGreaterThanOrEqual(2)
    for (const b of applied) expect(b.body.chat_template_kwargs).toEqual({ enable_thinking: true })
  })

  test('none given: none sent', async () => {
    const { origin, bodies } = await tokenizer('vllm')
    await probeTokenizer(origin, 'm', noOverhead)
    for (const b of bodies) expect(b.body).not.toHaveProperty('chat_template_kwargs')
  })
})
