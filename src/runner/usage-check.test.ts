import { describe, expect, test } from 'vitest'
import type { TokenizerProbe } from '../client/tokenize.ts'
import { RETOKENIZE_TOLERANCE } from '../schema/run.ts'
import { HELD_BYTES, retokenizedProblem, screenUsage, tokenizerVerdict, UsageCrossCheck } from './usage-check.ts'

/** A reply's usage and its streamed chunks, as the screen reads them. */
const reply = (completion: number | null, chunks: number, prompt: number | null = 10) => ({
  usagePromptTokens: prompt,
  usageCompletionTokens: completion,
  outputChunkAt: new Float64Array(chunks),
})

describe('screenUsage', () => {
  test('the lies an adversarial server told are each refused, naming the field and the value', () => {
    expect(screenUsage(reply(-5, 8), 16)).toBe('usage.completion_tokens is -5, not a non-negative integer')
    expect(screenUsage(reply(2.5, 8), 16)).toBe('usage.completion_tokens is 2.5, not a non-negative integer')
    expect(screenUsage(reply(Number.NaN, 8), 16)).toBe('usage.completion_tokens is not a number, not a non-negative integer')
    expect(screenUsage(reply(8, 8, -1), 16)).toBe('usage.prompt_tokens is -1, not a non-negative integer')
    expect(screenUsage(reply(1e12, 8), 16)).toMatch(
      /^usage\.completion_tokens is 1000000000000 for 8 streamed chunks, more than 16 a chunk/,
    )
    expect(screenUsage(reply(400, 8), 16)).toContain('(usageCheck.maxTokensPerChunk)')
    expect(screenUsage(reply(0, 8), 16)).toBe('usage.completion_tokens is 0, but 8 chunks streamed text')
  })

  test('honest shapes pass: a token a chunk, speculative and multi-token chunks up to the bound, no usage at all', () => {
    expect(screenUsage(reply(8, 8), 16)).toBeNull()
    expect(screenUsage(reply(128, 8), 16)).toBeNull()
    expect(screenUsage(reply(129, 8), 16)).not.toBeNull()
    expect(screenUsage(reply(50, 8), 4)).not.toBeNull()
    expect(screenUsage(reply(null, 8, null), 16)).toBeNull()
    // Nothing streamed: an empty completion is failed on its own, not here.
    expect(screenUsage(reply(0, 0), 16)).toBeNull()
  })
})

describe('retokenizedProblem', () => {
  test('agrees within the stated tolerance, in both directions, and refuses beyond it', () => {
    const allowed = RETOKENIZE_TOLERANCE.tokens + Math.ceil(RETOKENIZE_TOLERANCE.share * 100)
    expect(retokenizedProblem(100 + allowed, 100)).toBeNull()
    expect(retokenizedProblem(100 - allowed, 100)).toBeNull()
    expect(retokenizedProblem(101 + allowed, 100)).toBe(
      `usage.completion_tokens is ${101 + allowed}, but the engine's tokenizer counts 100 tokens in the streamed text (allowed: ±${allowed})`,
    )
    expect(retokenizedProblem(99 - allowed, 100)).not.toBeNull()
    // A short reply: the tokens of slack keep a leading-space token or a stop token from crying wolf.
    expect(retokenizedProblem(4, 3)).toBeNull()
    // Twice what streamed is caught at any length past the slack.
    expect(retokenizedProblem(64, 32)).not.toBeNull()
  })

  test('a reply the tokenizer could not count is judged on the chunk bound alone, and says so', () => {
    expect(tokenizerVerdict(10, null)).toEqual({ rule: 'chunk-bound', retokenized: null, problem: null })
    expect(tokenizerVerdict(10, 10)).toEqual({ rule: 'tokenizer', retokenized: 10, problem: null })
  })
})

/** A probe answering with a tokenizer that counts words and one BOS token, and records what it was asked. */
function wordTokenizer(asked: string[], failAfter = Infinity): () => Promise<TokenizerProbe> {
  return async () => ({
    warning: null,
    tokenizer: {
      description: 'words',
      countChat: async () => 0,
      countText: async (text) => {
        asked.push(text)
        if (asked.length > failAfter) throw new Error('ECONNREFUSED')
        return 1 + text.split(/\s+/).filter((w) => w !== '').length
      },
    },
  })
}

describe('UsageCrossCheck', () => {
  test("counts each held text once after the fact, the tokenizer's BOS taken off; states its rule", async () => {
    const asked: string[] = []
    const check = await UsageCrossCheck.start({ maxTokensPerChunk: 16, retokenize: true }, wordTokenizer(asked))
    expect(check.keepsText).toBe(true)
    expect(check.hold(0, ' a b c')).toBe(true)
    expect(check.hold(1, ' d e')).toBe(true)
    // Nothing is counted while replies are held.
    expect(asked).toEqual([''])
    const counts = await check.settle()
    expect([...counts.entries()].sort()).toEqual([
      [0, 3],
      [1, 2],
    ])
    expect(asked.slice(1).sort()).toEqual([' a b c', ' d e'])
    expect(check.plan).toEqual({
      maxTokensPerChunk: 16,
      retokenize: true,
      tokenizer: 'words',
      toleranceTokens: RETOKENIZE_TOLERANCE.tokens,
      toleranceShare: RETOKENIZE_TOLERANCE.share,
    })
    // A settled check holds nothing more.
    expect((await check.settle()).size).toBe(0)
  })

  test('past the held-text budget a reply is not held; a tokenizer that stops answering leaves the rest uncounted', async () => {
    const asked: string[] = []
    const check = await UsageCrossCheck.start({ maxTokensPerChunk: 16, retokenize: true }, wordTokenizer(asked, 2))
    expect(check.hold(0, 'x'.repeat(HELD_BYTES))).toBe(true)
    expect(check.hold(1, 'y')).toBe(false)
    expect(check.hold(2, null)).toBe(false)
    // What a held reply keeps alive counts against the same budget as its text.
    const keeping = await UsageCrossCheck.start({ maxTokensPerChunk: 16, retokenize: true }, wordTokenizer([], 2))
    expect(keeping.hold(0, 'a', HELD_BYTES - 1)).toBe(true)
    expect(keeping.hold(1, 'b', 1)).toBe(false)
    expect(keeping.hold(2, 'c')).toBe(false)
    expect([...(await keeping.settle()).keys()]).toEqual([0])
    // Settled, the budget is free again.
    expect(keeping.hold(3, 'd', HELD_BYTES - 1)).toBe(true)
    const more = await UsageCrossCheck.start({ maxTokensPerChunk: 16, retokenize: true }, wordTokenizer([], 2))
    for (let i = 0; i < 6; i++) more.hold(i, `w${i}`)
    const counts = await more.settle()
    expect(counts.get(0)).toBe(1)
    expect([...counts.values()].filter((n) => n === null).length).toBeGreaterThanOrEqual(4)
  })

  test('without retokenize, or without a tokenizer, the chunk bound alone: no text is kept', async () => {
    const asked: string[] = []
    const off = await UsageCrossCheck.start({ maxTokensPerChunk: 16, retokenize: false }, wordTokenizer(asked))
    expect(off.keepsText).toBe(false)
    expect(asked).toEqual([])
    const none = await UsageCrossCheck.start({ maxTokensPerChunk: 8, retokenize: true }, async () => ({ tokenizer: null, warning: 'none' }))
    expect(none.keepsText).toBe(false)
    expect(none.hold(0, 'text')).toBe(false)
    expect(none.plan.tokenizer).toBeNull()
    expect(none.plan.maxTokensPerChunk).toBe(8)
  })
})
