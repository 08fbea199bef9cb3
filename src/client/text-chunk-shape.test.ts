import { describe, expect, it } from 'vitest'
import { ChunkInterpreter } from './chunk-interpreter.ts'
import type { StreamObservation } from './observation.ts'
import { TextChunkShape } from './text-chunk-shape.ts'

const HEAD =
  '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1718000000,"model":"m","choices":[{"index":0,"delta":{"content":'
const chat = (text: string, finish: string | null = null): string =>
  `${HEAD}${JSON.stringify(text)}},"logprobs":null,"finish_reason":${JSON.stringify(finish)}}]}`

/** The reference: the chunk's content when it carries nothing else, by a full parse. */
function parsedText(data: string): string | null {
  try {
    const c = JSON.parse(data) as { choices?: { delta?: { content?: unknown }; text?: unknown; finish_reason?: unknown }[] }
    const choice = c.choices?.[0]
    if (choice === undefined || typeof choice.finish_reason === 'string') return null
    const text = choice.delta !== undefined ? choice.delta.content : choice.text
    return typeof text === 'string' && text.length > 0 ? text : null
  } catch {
    return null
  }
}

function learned(data: string): TextChunkShape {
  const shape = new TextChunkShape()
  shape.learn(data, parsedText(data) as string, parsedText)
  return shape
}

describe('TextChunkShape', () => {
  it('reads the next token chunk of a learned stream without a parse', () => {
    const shape = learned(chat(' the'))
    expect(shape.textOf(chat(' model'))).toBe(' model')
    expect(shape.textOf(chat('é 日本 🙂'))).toBe('é 日本 🙂')
    expect(shape.textOf(chat(''))).toBe('')
  })

  it('leaves every chunk that is not the learned one with a plain text to the parser', () => {
    const shape = learned(chat(' the'))
    expect(shape.textOf(chat(' end', 'length'))).toBeNull()
    expect(shape.textOf(chat('a "quote"'))).toBeNull()
    expect(shape.textOf(chat('back\\slash'))).toBeNull()
    expect(shape.textOf(chat('new\nline'))).toBeNull()
    expect(shape.textOf('{"id":"chatcmpl-1","choices":[],"usage":{"completion_tokens":3}}')).toBeNull()
    expect(shape.textOf(chat(' x').replace('chatcmpl-1', 'chatcmpl-2'))).toBeNull()
    expect(shape.textOf(HEAD)).toBeNull()
  })

  it('reads exactly what a full parse reads, for any text (a seeded sweep)', () => {
    let seed = 7
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed % n
    }
    const alphabet = ['a', ' ', '"', '\\', '\n', '\t', '\u0001', 'é', '日', '🙂', '}', ']', ',', ':', '/', '\u2028']
    const shape = learned(chat(' the'))
    let read = 0
    for (let i = 0; i < 2000; i++) {
      const text = Array.from({ length: rand(6) }, () => alphabet[rand(alphabet.length)]).join('')
      const finish = rand(10) === 0 ? 'stop' : null
      const data = chat(text, finish)
      const fast = shape.textOf(data)
      if (fast === null) continue
      read++
      expect(fast).toBe(parsedText(data) ?? '')
    }
    expect(read).toBeGreaterThan(200)
  })

  it('reads the completions API text key', () => {
    const text = (t: string): string =>
      `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":${JSON.stringify(t)},"logprobs":null,"finish_reason":null}]}`
    expect(learned(text('Hi')).textOf(text(' there'))).toBe(' there')
  })

  it('learns nothing where the bytes do not place the text unambiguously', () => {
    // Two text keys: the parser reads one, the bytes cannot say which.
    const both = '{"choices":[{"delta":{"content":"Hi"},"text":"Hi"}]}'
    expect(learned(both).textOf(both.replaceAll('Hi', 'Ho'))).toBeNull()
    // A key that ends in an escaped `content"` holds the text; the real key is written escaped.
    const trick = '{"x\\"content":"Hi","choices":[{"delta":{"\\u0063ontent":"Hi"}}]}'
    expect(parsedText(trick)).toBe('Hi')
    const shape = learned(trick)
    expect(shape.textOf('{"x\\"content":"Ho","choices":[{"delta":{"\\u0063ontent":"Hi"}}]}')).toBeNull()
  })

  it('stops learning from chunks whose text it cannot place, after a few', () => {
    const both = (t: string): string => `{"choices":[{"delta":{"content":"${t}"},"text":"${t}"}]}`
    const shape = new TextChunkShape()
    let probes = 0
    const counting = (data: string): string | null => {
      probes++
      return parsedText(data)
    }
    for (let i = 0; i < 3; i++) shape.learn(both(`a${i}`), `a${i}`, counting)
    expect(shape.learning).toBe(true)
    shape.learn(both('b'), 'b', counting)
    expect(shape.learning).toBe(false)
    expect(probes).toBe(0) // refused on the bytes alone, before any probe parse
    expect(shape.textOf(both('c'))).toBeNull()
  })

  it('stops learning after a stream of chunks that never match', () => {
    const shape = learned(chat(' the'))
    for (let i = 0; i < 3; i++) shape.textOf(`${chat(' x')} `)
    expect(shape.learning).toBe(true)
    shape.textOf(`${chat(' x')} `)
    expect(shape.learning).toBe(false)
    expect(shape.textOf(chat(' y'))).toBe(' y')
  })
})

describe('ChunkInterpreter with learned shapes', () => {
  /** Feeds each event's data as its own read at times 1, 2, 3…; returns the settled observation. */
  function observe(events: string[]): StreamObservation {
    let settled: StreamObservation | null = null
    const it = new ChunkInterpreter({
      dispatchedAt: 0,
      captureChars: 64,
      origin: 'http://127.0.0.1:1',
      keepStreamedText: true,
      onSettle: (obs) => (settled = obs),
    })
    it.onResponseStart(200, { 'content-type': 'text/event-stream' }, 0)
    events.forEach((e, i) => it.onResponseData(Buffer.from(`data: ${e}\n\n`), i + 1))
    if (settled === null) throw new Error('the stream did not settle')
    return settled
  }

  it('counts, stamps and keeps every chunk alike whether it was parsed or read by its shape', () => {
    const reasoning = (t: string): string =>
      `${HEAD.replace('"content":', '"reasoning_content":')}${JSON.stringify(t)}},"finish_reason":null}]}`
    const obs = observe([
      `${HEAD}""},"finish_reason":null}]}`,
      reasoning('think'),
      chat(' a'),
      chat(' b'),
      chat(''),
      chat(' "c"'),
      chat(' d'),
      chat(' e', 'length'),
      '{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":6}}',
      '[DONE]',
    ])
    expect(obs.error).toBeNull()
    expect(obs.streamedText).toBe('think a b "c" d e')
    expect(obs.content).toBe(' a b "c" d e')
    expect(obs.reasoningChunks).toBe(1)
    expect(obs.contentChunks).toBe(5)
    expect([...obs.outputChunkAt]).toEqual([2, 3, 4, 6, 7, 8])
    expect(obs.firstContentAt).toBe(3)
    expect(obs.finishReason).toBe('length')
    expect(obs.usageCompletionTokens).toBe(6)
  })
})
