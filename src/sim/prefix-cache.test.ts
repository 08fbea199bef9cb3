import { describe, expect, test } from 'vitest'
import { CachedPrompt, blockKeys, PrefixCache } from './prefix-cache.ts'
import { parseCompletionRequest, promptTokenIds } from './request-body.ts'
import { chatTokenIds } from './tokens.ts'

const ids = (n: number, from = 0): number[] => Array.from({ length: n }, (_, i) => from + i)

describe('blockKeys', () => {
  test('one key per whole block; block i depends on blocks 0..i', () => {
    const a = blockKeys(ids(40), 16)
    expect(a).toHaveLength(2)
    // Same first block, different second block: the first key is shared, the second is not.
    const b = blockKeys([...ids(16), ...ids(24, 100)], 16)
    expect(b[0]).toBe(a[0])
    expect(b[1]).not.toBe(a[1])
    // A change in block 0 changes every later key, even where the later tokens are equal.
    const c = blockKeys([99, ...ids(39, 1)], 16)
    expect(c[0]).not.toBe(a[0])
    expect(c[1]).not.toBe(a[1])
    expect(blockKeys(ids(40), 16)).toEqual(a)
    for (const key of a) expect(Number.isSafeInteger(key)).toBe(true)
  })
})

describe('PrefixCache', () => {
  test('a cold lookup finds nothing; after insert the leading whole blocks hit, the last token never', () => {
    const cache = new PrefixCache(1024, 16)
    const prompt = ids(40)
    const keys = blockKeys(prompt, 16)
    expect(cache.lookup(keys, 40)).toBe(0)
    cache.insert(keys)
    expect(cache.lookup(keys, 40)).toBe(32)
    // A prompt that is exactly its blocks recomputes its last block, as vLLM recomputes the last token.
    const whole = blockKeys(ids(32), 16)
    expect(cache.lookup(whole, 32)).toBe(16)
    expect(cache.counters()).toEqual({ queriedTokens: 40 + 40 + 32, hitTokens: 32 + 16 })
  })

  test('a hit stops at the first block that differs', () => {
    const cache = new PrefixCache(1024, 4)
    cache.insert(blockKeys(ids(12), 4))
    const other = [...ids(4), 77, 78, 79, 80, ...ids(4, 8)]
    expect(cache.lookup(blockKeys(other, 4), other.length)).toBe(4)
  })

  test('LRU eviction: over capacity the least recently used blocks leave, a prompt’s tail before its head', () => {
    const cache = new PrefixCache(8, 4) // two blocks
    const a = blockKeys(ids(9), 4) // two whole blocks
    const b = blockKeys(ids(9, 500), 4)
    cache.insert(a)
    expect(cache.blocks).toBe(2)
    cache.lookup(a, 9)
    cache.insert(b)
    expect(cache.blocks).toBe(2)
    expect(cache.lookup(a, 9)).toBe(0)
    expect(cache.lookup(b, 9)).toBe(8)
    // One more block: b's tail goes first, so b still hits its head.
    cache.insert(blockKeys(ids(5, 900), 4))
    expect(cache.lookup(b, 9)).toBe(4)
  })

  test('a hit makes its blocks the most recently used', () => {
    const cache = new PrefixCache(8, 4)
    const a = blockKeys(ids(5), 4)
    const b = blockKeys(ids(5, 100), 4)
    const c = blockKeys(ids(5, 200), 4)
    cache.insert(a)
    cache.insert(b)
    expect(cache.lookup(a, 5)).toBe(4)
    cache.insert(c)
    expect(cache.lookup(b, 5)).toBe(0)
    expect(cache.lookup(a, 5)).toBe(4)
  })

  test('reset empties it and keeps the counters; a capacity of 0 holds nothing', () => {
    const cache = new PrefixCache(64, 4)
    const keys = blockKeys(ids(20), 4)
    cache.insert(keys)
    expect(cache.reset()).toBe(5)
    expect(cache.blocks).toBe(0)
    expect(cache.lookup(keys, 20)).toBe(0)
    expect(cache.counters().queriedTokens).toBe(20)
    const off = new PrefixCache(0, 16)
    expect(off.enabled).toBe(false)
    off.insert(keys)
    expect(off.lookup(keys, 20)).toBe(0)
    expect(off.counters()).toEqual({ queriedTokens: 0, hitTokens: 0 })
  })

  test('CachedPrompt looks up once, as its prefill starts, and caches its blocks as it ends', () => {
    const cache = new PrefixCache(1024, 4)
    let tokenized = 0
    const first = new CachedPrompt(cache, () => (tokenized++, ids(10)))
    expect(first.cachedTokens).toBeNull()
    expect(first.lookup()).toBe(0)
    expect(first.lookup()).toBe(0)
    expect(tokenized).toBe(1)
    const second = new CachedPrompt(cache, () => ids(10))
    expect(second.lookup()).toBe(0)
    first.prefilled()
    expect(new CachedPrompt(cache, () => ids(10)).lookup()).toBe(8)
  })
})

describe('the sim’s prompt as its engine sees it', () => {
  const chatIds = (messages: Array<{ role: string; content: string }>): readonly number[] => {
    const parsed = parseCompletionRequest('chat', { messages, stream: true })
    if (!parsed.ok) throw new Error(parsed.message)
    expect(promptTokenIds(parsed.request)).toHaveLength(parsed.request.promptTokens)
    return promptTokenIds(parsed.request)
  }

  test('a conversation’s next turn begins with its previous prompt, generation prompt included', () => {
    const turn1 = chatIds([
      { role: 'system', content: 'you are terse' },
      { role: 'user', content: 'first question here' },
    ])
    const turn2 = chatIds([
      { role: 'system', content: 'you are terse' },
      { role: 'user', content: 'first question here' },
      { role: 'assistant', content: 'an answer' },
      { role: 'user', content: 'second question' },
    ])
    expect(turn2.slice(0, turn1.length)).toEqual(turn1)
  })

  test('roles are tokens: the same text under another role is another prompt', () => {
    expect(chatIds([{ role: 'user', content: 'same words' }])).not.toEqual(chatIds([{ role: 'system', content: 'same words' }]))
    // 4 template tokens per message, its 2 pieces, 3 for the generation prompt.
    expect(chatTokenIds([{ role: 'user', text: 'a b' }])).toHaveLength(4 + 2 + 3)
  })

  test('completions: a text prompt is its pieces, a token-id prompt is itself', () => {
    const text = parseCompletionRequest('completions', { prompt: 'summarize it', stream: true })
    const tokens = parseCompletionRequest('completions', { prompt: [5, 6, 7], stream: true })
    if (!text.ok || !tokens.ok) throw new Error('not parsed')
    expect(promptTokenIds(text.request)).toHaveLength(4)
    expect(promptTokenIds(tokens.request)).toEqual([5, 6, 7])
  })
})
