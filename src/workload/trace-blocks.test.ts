import { describe, expect, test } from 'vitest'
import type { EngineTokenizer, TokenizerProbe } from '../client/tokenize.ts'
import { countChatTokens, countTokens } from '../sim/tokens.ts'
import { type PlannedSize, type PreparePlan, prepareWorkload, streamSha256 } from './prepare.ts'
import { BLOCK_WORDS, BlockWords } from './trace-blocks.ts'

/** The simulated engine's own tokenizer, as its `/tokenize` answers, counting its calls. */
function simTokenizer(): EngineTokenizer & { calls: number } {
  const t = {
    calls: 0,
    description: 'sim',
    countText: async (text: string) => {
      t.calls++
      return countTokens(text)
    },
    countChat: async (messages: ReadonlyArray<{ content: string }>) => {
      t.calls++
      return countChatTokens(messages.map((m) => m.content))
    },
  }
  return t
}

const probe = (tokenizer: EngineTokenizer): TokenizerProbe => ({ tokenizer, warning: null })

/** A trace's sizes: [input_length, hash_ids] per row, 4 output tokens each. */
function sizes(rows: ReadonlyArray<readonly [number, number[] | null]>): PlannedSize[] {
  return rows.map(([promptTokens, hashIds]) => ({ promptTokens, maxTokens: 4, hashIds }))
}

function tracePlan(rows: PlannedSize[], blockTokens: number, api: 'chat' | 'completions' = 'completions'): PreparePlan {
  return { api, maxTokens: 4, requests: rows.length, warmupRequests: 1, sizes: rows, blockTokens }
}

/** The prompt a body sends (completions `prompt`, or the one chat message's content). */
function promptOf(body: string): string {
  const json = JSON.parse(body) as { prompt?: string; messages?: Array<{ content: string }> }
  return json.prompt ?? (json.messages?.[0]?.content as string)
}

const ROWS = sizes([
  [180, [1, 2, 3]],
  [150, [1, 2, 4]],
  [40, [5]],
  [100, null],
  [300, [1, 2]], // its blocks cover 128 tokens: its own words fill the rest
])

describe('BlockWords', () => {
  const words = new BlockWords(BLOCK_WORDS, 7)

  test('a block is a function of its id and the seed: the same bytes every time, a partial block its first words', () => {
    expect(words.block(46, 512)).toBe(new BlockWords(BLOCK_WORDS, 7).block(46, 512))
    expect(words.block(46, 512).split(' ')).toHaveLength(512)
    expect(words.block(46, 512).startsWith(`${words.block(46, 100)} `)).toBe(true)
    expect(words.block(47, 64)).not.toBe(words.block(46, 64))
    expect(new BlockWords(BLOCK_WORDS, 8).block(46, 64)).not.toBe(words.block(46, 64))
  })

  test('ids past 32 bits and negative ids are blocks of their own, not their low halves', () => {
    const blocks = [1, 2 ** 32 + 1, -1, 2 ** 32 - 1, Number.MAX_SAFE_INTEGER].map((id) => words.block(id, 32))
    expect(new Set(blocks).size).toBe(blocks.length)
    expect(new Set(BLOCK_WORDS).size).toBe(BLOCK_WORDS.length)
  })
})

describe('a trace with hash_ids, sized with the engine tokenizer', () => {
  test('every prompt is its input_length by the engine’s count, each block exactly blockTokens', async () => {
    const tokenizer = simTokenizer()
    const w = await prepareWorkload({}, tracePlan(ROWS, 64), probe(tokenizer))
    expect(w.calibration).toMatchObject({ method: 'engine-tokenizer', tokenizer: 'sim', warning: null, outsideTolerance: 0 })
    ROWS.forEach((row, i) => {
      const r = w.request(i)
      expect(countTokens(promptOf(r.body)), `request ${i}`).toBe(row.promptTokens)
      expect(r.plannedPromptTokens).toBe(row.promptTokens)
    })
    // Each of request 0's first two blocks is 64 of the engine's tokens.
    const words = promptOf(w.request(0).body).split(' ')
    expect(countTokens(words.slice(0, 64).join(' '))).toBe(64)
    expect(countTokens(words.slice(64, 128).join(' '))).toBe(64)
  })

  test('requests sharing leading ids share those bytes, block by block, and differ from the first other block', async () => {
    const w = await prepareWorkload({ seed: 3 }, tracePlan(ROWS, 64), probe(simTokenizer()))
    const words = ROWS.map((_, i) => promptOf(w.request(i).body).split(' '))
    const [first, second, third, , fifth] = words as [string[], string[], string[], string[], string[]]
    // Blocks 1 and 2: the same 128 words in requests 0, 1 and 4.
    expect(second.slice(0, 128)).toEqual(first.slice(0, 128))
    expect(fifth.slice(0, 128)).toEqual(first.slice(0, 128))
    // Block 3 vs block 4: different text from their first words on.
    expect(second.slice(128, 136)).not.toEqual(first.slice(128, 136))
    expect(third.slice(0, 8)).not.toEqual(first.slice(0, 8))
    // Request 4's own words after its blocks are not request 0's third block.
    expect(fifth.slice(128, 136)).not.toEqual(first.slice(128, 136))
  })

  test('both arms plan the same bytes; calibration costs a fixed number of calls, not one per request', async () => {
    const a = simTokenizer()
    const b = simTokenizer()
    const wa = await prepareWorkload({ seed: 5 }, tracePlan(ROWS, 64), probe(a))
    const wb = await prepareWorkload({ seed: 5 }, tracePlan(ROWS, 64), probe(b))
    expect(streamSha256(wb)).toBe(streamSha256(wa))
    expect(a.calls).toBeLessThanOrEqual(6)
    const other = await prepareWorkload({ seed: 6 }, tracePlan(ROWS, 64), probe(simTokenizer()))
    expect(streamSha256(other)).not.toBe(streamSha256(wa))
  })

  test('a chat prompt holds its input_length with the template counted', async () => {
    const w = await prepareWorkload({}, tracePlan(ROWS, 64, 'chat'), probe(simTokenizer()))
    ROWS.forEach((row, i) => expect(countChatTokens([promptOf(w.request(i).body)])).toBe(row.promptTokens))
    expect(w.calibration.method).toBe('engine-tokenizer')
  })

  test('canary markers that tokenize differently are measured request by request', async () => {
    // One token a word, plus one for every 7: markers SGREQ-0-00007 and SGREQ-0-00000 differ by a token.
    const sevens: EngineTokenizer = {
      description: 'sevens',
      countText: async (text) => text.split(/\s+/).filter(Boolean).length + (text.match(/7/g)?.length ?? 0),
      countChat: async (m) => sevens.countText(m[0]?.content ?? ''),
    }
    const rows = sizes(Array.from({ length: 9 }, (_, i) => [120, [i % 2]] as const))
    const w = await prepareWorkload({ canaries: true }, tracePlan(rows, 32), probe(sevens))
    for (let i = 0; i < rows.length; i++) {
      const r = w.request(i)
      expect(promptOf(r.body)).toContain(`SGREQ-0-0000${i}`)
      expect(await sevens.countText(promptOf(r.body)), `request ${i}`).toBe(120)
    }
  })

  test('warm-up requests share no block with the measured ones', async () => {
    const w = await prepareWorkload({ promptTokens: 96 }, tracePlan(ROWS, 64), probe(simTokenizer()))
    const warm = promptOf(w.request(ROWS.length).body)
    expect(countTokens(warm)).toBe(96)
    expect(warm.split(' ').slice(0, 8)).not.toEqual(promptOf(w.request(0).body).split(' ').slice(0, 8))
  })
})

describe('when the tokenizer cannot hold block sizes exactly', () => {
  test('a tokenizer that cuts the words is said in the warning, and sizes are estimated', async () => {
    const chars: EngineTokenizer = {
      description: 'chars',
      countText: async (text) => text.length,
      countChat: async (m) => m[0]?.content.length ?? 0,
    }
    const w = await prepareWorkload({}, tracePlan(ROWS, 64), probe(chars))
    expect(w.calibration.method).toBe('estimate')
    expect(w.calibration.warning).toMatch(
      /^only 0 of \d+ block words are one token to the engine's tokenizer; trace blocks are sized at an estimated one token per word$/,
    )
    expect(w.request(0).plannedPromptTokens).toBeNull()
  })

  test('without a tokenizer the same bytes are planned, estimated', async () => {
    const w = await prepareWorkload({}, tracePlan(ROWS, 64), null)
    expect(w.calibration).toMatchObject({ method: 'estimate', warning: expect.stringMatching(/^no tokenizer was probed; /) })
    expect(promptOf(w.request(1).body).split(' ').slice(0, 128)).toEqual(promptOf(w.request(0).body).split(' ').slice(0, 128))
  })
})

describe('refused at planning, naming the fix', () => {
  test.each([
    [
      { kind: 'shared-prefix' as const },
      /^workload\.kind: a trace with hash_ids builds each prompt from its blocks, not from shared-prefix; /,
    ],
    [
      { prefixCache: { mode: 'shared' as const, tokens: 64 } },
      /^workload\.prefixCache: a trace with hash_ids decides what requests share; /,
    ],
  ])('%j', async (workload, message) => {
    await expect(prepareWorkload(workload, tracePlan(ROWS, 64), null)).rejects.toThrow(message)
  })
})

test('a 100,000-row trace plans at once: a handful of tokenizer calls, bodies built only when asked', async () => {
  let id = 0
  const rows = sizes(Array.from({ length: 100_000 }, (_, i) => [600 + (i % 7) * 100, i % 3 === 0 ? [0, 1, ++id] : [0, ++id]] as const))
  const tokenizer = simTokenizer()
  const started = performance.now()
  const w = await prepareWorkload({}, tracePlan(rows, 512), probe(tokenizer))
  const plannedMs = performance.now() - started
  expect(tokenizer.calls).toBeLessThanOrEqual(6)
  // Generous for a loaded two-core machine; it takes a few tens of ms.
  expect(plannedMs).toBeLessThan(5_000)
  expect(countTokens(promptOf(w.request(99_999).body))).toBe(rows[99_999]?.promptTokens)
})
