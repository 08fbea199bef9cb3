import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { loadConversations } from './conversation-file.ts'
import { prepareWorkload } from './prepare.ts'

const FIXTURES = join(import.meta.dirname, '../../fixtures/conversations')

describe('conversations from a file', () => {
  test('OpenAI messages JSONL: each line a conversation, its system message, text parts joined, blank lines skipped', async () => {
    const file = await loadConversations(join(FIXTURES, 'openai-messages.jsonl'))
    expect(file.sha256).toMatch(/^[0-9a-f]{64}$/)
    expect(file.conversations.map((c) => [c.line, c.system, c.turns.length])).toEqual([
      [1, 'You are a terse assistant for a bakery.', 3],
      [2, null, 3],
      [4, null, 1],
    ])
    expect(file.conversations[0]?.turns[2]).toEqual({ user: 'And frozen?', assistant: null })
    expect(file.conversations[1]?.turns[0]?.user).toBe('Name three rivers in France.')
  })

  test("ShareGPT's JSON array: human and gpt turns, a system speaker", async () => {
    const file = await loadConversations(join(FIXTURES, 'sharegpt.json'))
    expect(file.conversations.map((c) => [c.system, c.turns.map((t) => t.user)])).toEqual([
      [null, ['How do I boil an egg?', 'Soft instead?', 'And to peel it?']],
      ['Answer as a sailor.', ['What is a knot?', 'How long is a nautical mile?', 'Why that number?']],
    ])
  })

  test.for([
    ['{"messages":[{"role":"tool","content":"x"}]}', /bad\.jsonl:1: `messages\[0\]\.role` is "tool"; use system, user or assistant/],
    ['{"conversations":[{"from":"robot","value":"x"}]}', /bad\.jsonl:1: `conversations\[0\]\.from` is "robot"; use human, gpt or system/],
    ['{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}', /message 1 is a user turn after a user turn/],
    ['\n{"prompt":"x"}', /bad\.jsonl:2: expected an object with `messages` \(OpenAI chat\) or `conversations` \(ShareGPT\)/],
    [
      '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}',
      /`messages\[0\]\.content\[0\]` is not a text part/,
    ],
    ['not json', /bad\.jsonl:1: not valid JSON/],
  ] as const)('a bad line names its line and field: %s', async ([text, message], { testDir }) => {
    const path = join(testDir, 'bad.jsonl')
    await writeFile(path, text)
    await expect(loadConversations(path)).rejects.toMatchObject({ code: 'FILE_INVALID', message: expect.stringMatching(message) })
  })

  test('a plan from a file: sessions cycle the conversations with enough turns; a replayed history is the file’s own replies', async () => {
    const w = await prepareWorkload(
      { kind: 'conversation', sessions: 3, turns: 3, conversations: join(FIXTURES, 'openai-messages.jsonl') },
      { api: 'chat', maxTokens: 16, requests: 9, warmupRequests: 0 },
      null,
    )
    expect(w.dataset).toMatchObject({ rows: 3 })
    expect(w.conversation?.plan).toMatchObject({ userTokens: null, assistantTokens: null, history: 'replayed' })
    const messages = (i: number) => (JSON.parse(w.request(i).body) as { messages: Array<{ role: string; content: string }> }).messages
    expect(messages(2)).toEqual([
      { role: 'system', content: 'You are a terse assistant for a bakery.' },
      { role: 'user', content: 'What bread do you bake on Mondays?' },
      { role: 'assistant', content: 'Rye and a seeded sourdough.' },
      { role: 'user', content: 'Which one keeps longer?' },
      { role: 'assistant', content: 'The rye: about five days wrapped.' },
      { role: 'user', content: 'And frozen?' },
    ])
    // The one-turn conversation is skipped: session 2 goes round to the first again.
    expect(messages(4).at(-1)?.content).toBe('Which is longest?')
    expect(messages(6)).toEqual(messages(0))
    await expect(
      prepareWorkload(
        { kind: 'conversation', sessions: 1, turns: 4, conversations: join(FIXTURES, 'sharegpt.json') },
        { api: 'chat', maxTokens: 16, requests: 4, warmupRequests: 0 },
        null,
      ),
    ).rejects.toThrow(/no conversation has 4 user turns \(the longest has 3\); set workload\.turns to 3 or less/)
  })
})
